/* A text pasted into a field with a length limit (textarea maxlength) is cut by the browser
 * without a word: the field then says so, with the limit, so that the person checks the end
 * of what was kept. Without JavaScript the server refuses a text over the limit, saying it. */
(function () {
  "use strict";

  function notice(field) {
    var id = (field.id || field.name) + "-limite";
    var p = document.getElementById(id);
    if (!p) {
      p = document.createElement("p");
      p.id = id;
      p.className = "field__error";
      p.setAttribute("role", "alert");
      field.insertAdjacentElement("afterend", p);
      var described = field.getAttribute("aria-describedby");
      field.setAttribute("aria-describedby", described ? described + " " + id : id);
    }
    return p;
  }

  document.addEventListener("paste", function (event) {
    var field = event.target;
    if (!field || field.tagName !== "TEXTAREA" || !field.maxLength || field.maxLength < 0) { return; }
    var text = event.clipboardData ? event.clipboardData.getData("text") : "";
    var selected = (field.selectionEnd || 0) - (field.selectionStart || 0);
    var room = field.maxLength - (field.value.length - selected);
    if (text.length <= room) { return; }
    var limit = field.maxLength.toLocaleString("pt-BR");
    notice(field).textContent = "O texto colado passa do limite de " + limit +
      " caracteres: só o começo cabe no campo (" + Math.max(room, 0).toLocaleString("pt-BR") +
      " de " + text.length.toLocaleString("pt-BR") + "). Confira o fim do texto.";
  });
}());
