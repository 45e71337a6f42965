/* Proposal page: opened at #confirmar or #descartar (the queue's c and d keys), the focus goes
 * to that form's first field; after a refused step, to the first field in error. The agent
 * still reads, answers and sends the form: nothing is sent from here. */
(function () {
  "use strict";

  function firstField(container) {
    // The first field in error, else the form's first field (a selector list matches in page
    // order, so the two are asked for in turn).
    return container && (container.querySelector("[aria-invalid='true']") || container.querySelector(
      "textarea, input:not([type='hidden']), select, button"));
  }

  function focusForm() {
    var target = document.querySelector(".action[data-invalid]");
    if (!target && window.location.hash) {
      var id = window.location.hash.slice(1);
      if (/^[a-z]+$/.test(id)) { target = document.getElementById(id); }
    }
    var field = firstField(target);
    if (field) {
      field.focus();
      if (target.scrollIntoView) { target.scrollIntoView({block: "start"}); }
    }
  }

  // After the browser's own scroll to the fragment, which moves the focus to the document.
  if (document.readyState === "complete") {
    window.setTimeout(focusForm, 0);
  } else {
    window.addEventListener("load", function () { window.setTimeout(focusForm, 0); });
  }
})();
