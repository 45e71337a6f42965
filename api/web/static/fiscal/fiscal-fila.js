/* Keyboard triage of the proposals queue.
 *
 *   j or ↓  next proposal        k or ↑  previous proposal
 *   Enter   open it (the focused link)
 *   c       open it at the confirmation form     d  open it at the dismissal form
 *
 * Nothing is confirmed or dismissed from here: c and d only open the proposal's form, where
 * the agent reads the evidence and answers what the rule asks. The keys are ignored while
 * typing in a field or with Ctrl/Alt/Meta; the arrows only move while the focus is in the
 * queue (elsewhere they scroll the page as usual).
 */
(function () {
  "use strict";

  var table = document.getElementById("fila");
  if (!table) { return; }
  var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr[data-href]"));
  if (!rows.length) { return; }
  var current = -1;
  var status = document.getElementById("fila-estado");

  function link(row) { return row.querySelector("a.queue__open"); }

  function select(index) {
    if (index < 0 || index >= rows.length) { return; }
    if (current >= 0) { rows[current].classList.remove("is-current"); }
    current = index;
    var row = rows[current];
    row.classList.add("is-current");
    link(row).focus();
    if (status) {
      status.textContent = "Proposta " + (current + 1) + " de " + rows.length + " selecionada.";
    }
  }

  rows.forEach(function (row, index) {
    link(row).addEventListener("focus", function () {
      if (current !== index) {
        if (current >= 0) { rows[current].classList.remove("is-current"); }
        current = index;
        row.classList.add("is-current");
      }
    });
  });

  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.altKey || event.metaKey || typing(event.target)) { return; }
    var inQueue = table.contains(document.activeElement);
    var key = event.key;
    if (key === "j" || (key === "ArrowDown" && inQueue)) {
      select(current < 0 ? 0 : Math.min(current + 1, rows.length - 1));
    } else if (key === "k" || (key === "ArrowUp" && inQueue)) {
      select(current < 0 ? 0 : Math.max(current - 1, 0));
    } else if ((key === "c" || key === "d") && current >= 0) {
      var row = rows[current];
      if (row.getAttribute("data-status") !== "proposta") {
        if (status) { status.textContent = "Esta proposta não está mais aguardando revisão."; }
        return;
      }
      window.location.assign(row.getAttribute("data-href") + (key === "c" ? "#confirmar" : "#descartar"));
    } else {
      return;
    }
    event.preventDefault();
  });
})();
