/* Importação: refuse a file over the server's limit before it is sent (the server checks too). */
(function () {
  "use strict";
  var form = document.getElementById("form-importacao");
  if (!form) return;
  var limit = Number(form.getAttribute("data-max-bytes"));
  var input = form.querySelector('input[type="file"]');
  var message = document.getElementById("importacao-tamanho");
  function megabytes(bytes) {  // as the server says sizes: "1,9 MB"
    return (bytes / 1048576).toLocaleString("pt-BR", { maximumFractionDigits: 1 }) + " MB";
  }
  form.addEventListener("submit", function (event) {
    var file = input && input.files && input.files[0];
    if (file && limit && file.size > limit) {
      event.preventDefault();
      message.textContent =
        "O arquivo tem " + megabytes(file.size) + "; o limite é " + megabytes(limit) + ".";
      message.hidden = false;
      message.setAttribute("role", "alert");
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  });
})();
