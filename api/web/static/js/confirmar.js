/* Consequential forms ask before they are sent: <form data-confirm="Lavrar o auto …?">.
 * "{name}" in the text reads the form's field of that name (a select: the chosen option's
 * text; radio buttons: the chosen one's label; a date field with data-confirm-as="dd/mm/aaaa":
 * the date so written), so the question names what the person typed.
 * Cancelled: nothing is sent. A form whose fields break their own limits (required, minlength,
 * counted without the spaces around the text, as the server counts) is sent without asking: the server refuses it with its message, so nothing is confirmed in
 * vain. Without JavaScript the form is sent as it is (the server still checks every field). */
(function () {
  "use strict";

  var NOT_CHOSEN = "(não escolhido)";

  function chosenText(inputs) {
    var checked = Array.prototype.filter.call(inputs, function (f) { return f.checked; })[0];
    if (!checked) return NOT_CHOSEN;
    var label = checked.labels && checked.labels[0];
    return label ? label.textContent.trim() : checked.value;
  }

  function fieldText(field) {
    if (!field.tagName) return chosenText(field);  // radio buttons sharing the name
    if (field.type === "radio" || field.type === "checkbox") return chosenText([field]);
    if (field.getAttribute("data-confirm-as") === "dd/mm/aaaa" &&
        /^\d{4}-\d{2}-\d{2}$/.test(field.value)) {
      var ymd = field.value.split("-");
      return ymd[2] + "/" + ymd[1] + "/" + ymd[0];  // as people read it: dd/mm/aaaa
    }
    if (field.tagName === "SELECT") {
      var option = field.options[field.selectedIndex];
      return option && option.value ? option.text : NOT_CHOSEN;
    }
    return (field.value || "").trim() || "(não informado)";
  }

  // The server trims what is typed: spaces alone do not fill a required field or a minimum.
  function trimmedShort(form) {
    return Array.prototype.some.call(form.querySelectorAll("textarea, input[type='text']"), function (f) {
      var min = Number(f.getAttribute("minlength") || (f.required ? 1 : 0));
      return min > 0 && f.value.trim().length < min;
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var text = form && form.getAttribute && form.getAttribute("data-confirm");
    if (!text || !form.checkValidity() || trimmedShort(form)) return;
    var question = text.replace(/\{([a-z_]+)\}/g, function (whole, name) {
      var field = form.elements.namedItem(name);
      return field ? fieldText(field) : whole;  // not a field's name: kept as written
    });
    if (!window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
