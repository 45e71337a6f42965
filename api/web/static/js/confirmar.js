/* Consequential forms ask before they are sent: <form data-confirm="Lavrar o auto …?">.
 * "{name}" in the text reads the form's field of that name (a select: the chosen option's
 * text), so the question names what the person typed. Cancelled: nothing is sent. Without
 * JavaScript the form is sent as it is (the server still checks every field). */
(function () {
  "use strict";

  function fieldText(form, name) {
    var field = form.elements[name];
    if (!field) return "";
    if (field.tagName === "SELECT") {
      var option = field.options[field.selectedIndex];
      return option && option.value ? option.text : "(não escolhido)";
    }
    return (field.value || "").trim() || "(não informado)";
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var text = form && form.getAttribute && form.getAttribute("data-confirm");
    if (!text) return;
    var question = text.replace(/\{([a-z_]+)\}/g, function (_, name) {
      return fieldText(form, name);
    });
    if (!window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
