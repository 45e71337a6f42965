/* Meus pontos: the "now" panel of a stand refreshes itself from its fragment
 * (data-live-url) every data-live-interval-s seconds while the page is visible; paused while
 * the tab is hidden, refreshed at once when it shows again. A change of the summary is read out
 * by the polite live region #agora-anuncio. A session that ended sends the page to the login. */
(function () {
  "use strict";
  var panel = document.getElementById("agora");
  if (!panel || !window.fetch) return;
  var url = panel.getAttribute("data-live-url");
  var intervalMs = Math.max(2, Number(panel.getAttribute("data-live-interval-s")) || 5) * 1000;
  var state = document.getElementById("agora-estado");
  var announce = document.getElementById("agora-anuncio");
  var button = document.getElementById("agora-atualizar");
  var timer = null;
  var inFlight = false;
  var failures = 0;

  function summaryOf(root) {
    var node = root.querySelector("[data-summary]");
    return node ? node.getAttribute("data-summary") : "";
  }
  var lastSummary = summaryOf(panel);

  function schedule(delayMs) {
    window.clearTimeout(timer);
    timer = null;
    if (!document.hidden) timer = window.setTimeout(refresh, delayMs);
  }

  function say(text) {
    if (state) state.textContent = text;
  }

  function refresh() {
    if (document.hidden || inFlight) return;
    inFlight = true;
    fetch(url, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "text/html", "X-Requested-With": "fetch" },
    })
      .then(function (response) {
        if (response.redirected && response.url.indexOf("/entrar") !== -1) {
          window.location.reload(); // the session ended: the page itself goes to the login
          return null;
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        inFlight = false;
        if (html === null) return;
        failures = 0;
        var box = document.createElement("div");
        box.innerHTML = html;
        var summary = summaryOf(box);
        panel.innerHTML = html;
        if (summary !== lastSummary && announce) announce.textContent = summary;
        lastSummary = summary;
        var at = panel.querySelector("[data-at]");
        say("Atualizado" + (at ? " (situação às " + at.getAttribute("data-at") + ")" : "") +
          "; atualiza sozinho a cada " + intervalMs / 1000 + " s.");
        schedule(intervalMs);
      })
      .catch(function () {
        inFlight = false;
        failures += 1;
        say("Sem resposta do servidor; nova tentativa em instantes. A fila mostrada pode estar desatualizada.");
        schedule(Math.min(60000, intervalMs * Math.pow(2, failures)));
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      window.clearTimeout(timer);
      timer = null;
      say("Atualização pausada enquanto a página não está à vista.");
    } else {
      refresh();
    }
  });
  if (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      schedule(0);
    });
  }
  schedule(intervalMs);
})();
