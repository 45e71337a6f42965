/* A page answered with an error (a form sent back to be corrected) moves the focus, and the
 * view, to the first error notice or field marked invalid, in page order (a form's error
 * summary comes before its fields): a form low on a long page must not look as if nothing
 * happened. Nothing is done when another script already placed the focus, or without error. */
(function () {
  "use strict";

  function focusError() {
    if (document.activeElement && document.activeElement !== document.body) { return; }
    var target = document.querySelector(
      "main .notice--error[role='alert'], main .field__error[role='alert'], main [aria-invalid='true']"
    );
    if (!target) { return; }
    if (!target.hasAttribute("tabindex") && !/^(INPUT|SELECT|TEXTAREA|BUTTON|A)$/.test(target.tagName)) {
      target.setAttribute("tabindex", "-1");
    }
    target.focus({preventScroll: true});
    if (target.scrollIntoView) { target.scrollIntoView({block: "center"}); }
  }

  if (document.readyState === "complete") {
    window.setTimeout(focusError, 0);
  } else {
    window.addEventListener("load", function () { window.setTimeout(focusError, 0); });
  }
}());
