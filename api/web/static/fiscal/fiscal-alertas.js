/* Inbox of the Fiscalização: alerts arriving live over Server-Sent Events.
 *
 * The server renders the latest alerts as a plain list (it works without JavaScript). This
 * script opens an EventSource on the list's data-stream URL (the alerts after the newest one
 * shown), prepends each new alert once (an alert id already shown is never added again, even
 * after a reconnection, when the browser sends Last-Event-ID), counts it in the inbox's total
 * ("Todos os alertas (N)"), marks it new, announces it in
 * the status line (aria-live) and in the page title, and plays a short tone only when the user
 * turned the sound on (never by itself; the choice is kept in localStorage). An alert announced
 * again (event "revision": a provisional one confirmed when its day closed, or withdrawn)
 * replaces its item when shown, marked "Atualizado", and is announced in the status line.
 */
(function () {
  "use strict";

  var list = document.getElementById("alertas");
  var status = document.getElementById("alertas-estado");
  var total = document.getElementById("alertas-total");
  if (!list || !status || !window.EventSource) { return; }

  var MAX_ITEMS = 50;
  var SOUND_KEY = "pontual.fiscal.som";
  var seen = new Set();
  var unread = 0;
  var baseTitle = document.title;
  var soundBox = document.getElementById("alertas-som");
  var soundWrap = document.getElementById("alertas-som-campo");
  var audio = null;

  Array.prototype.forEach.call(list.querySelectorAll("[data-alert-id]"), function (item) {
    seen.add(item.getAttribute("data-alert-id"));
  });

  function setStatus(text, state) {
    status.textContent = text;
    status.setAttribute("data-state", state);
  }

  // Sound: off unless the user turns it on (a user gesture, so the audio may start).
  if (soundWrap) { soundWrap.hidden = false; }
  if (soundBox) {
    try { soundBox.checked = window.localStorage.getItem(SOUND_KEY) === "1"; } catch (e) { /* private mode */ }
    soundBox.addEventListener("change", function () {
      try { window.localStorage.setItem(SOUND_KEY, soundBox.checked ? "1" : "0"); } catch (e) { /* ignore */ }
      if (soundBox.checked) { beep(); }
    });
  }

  function beep() {
    if (!soundBox || !soundBox.checked) { return; }
    var Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) { return; }
    try {
      audio = audio || new Context();
      if (audio.state === "suspended") { audio.resume(); }
      var osc = audio.createOscillator();
      var gain = audio.createGain();
      osc.type = "sine";
      osc.frequency.value = 880;
      gain.gain.setValueAtTime(0.0001, audio.currentTime);
      gain.gain.exponentialRampToValueAtTime(0.2, audio.currentTime + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, audio.currentTime + 0.35);
      osc.connect(gain);
      gain.connect(audio.destination);
      osc.start();
      osc.stop(audio.currentTime + 0.4);
    } catch (e) { /* no audio device: the visual cue remains */ }
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function item(alert, mark) {
    var li = el("li", "alert alert--new");
    li.setAttribute("data-alert-id", alert.alert_id);
    var title = el("p", "alert__title");
    title.appendChild(el("span", "badge badge--new", mark));
    title.appendChild(document.createTextNode(" " + alert.kind_label));
    if (alert.unsettled) {
      title.appendChild(document.createTextNode(" "));
      title.appendChild(el("span", "badge", alert.unsettled));
    }
    li.appendChild(title);
    var meta = alert.who;
    if (alert.stand_id) { meta += " · ponto " + alert.stand_id; }
    meta += " · " + alert.when + " · confiança " + alert.confidence;
    li.appendChild(el("p", "alert__meta", meta));
    var links = el("p", "alert__links");
    // As the page says it: a new alert has no proposal yet (generated from its finding).
    var a = el("a", "", alert.unsettled || mark !== "Novo" ? "Ver a evidência" : "Ver a evidência e gerar a proposta");
    a.href = alert.href;
    links.appendChild(a);
    li.appendChild(links);
    return li;
  }

  function add(alert) {
    if (!alert || !alert.alert_id || seen.has(alert.alert_id)) { return; }
    seen.add(alert.alert_id);
    var empty = document.getElementById("alertas-vazio");
    if (empty) { empty.remove(); }
    list.insertBefore(item(alert, "Novo"), list.firstChild);
    while (list.children.length > MAX_ITEMS) { list.removeChild(list.lastChild); }
    unread += 1;
    if (total) { total.textContent = String(Number(total.textContent.replace(/\D/g, "")) + 1); }
    document.title = "(" + unread + ") " + baseTitle;
    setStatus("Novo alerta: " + alert.kind_label + ", " + alert.who.charAt(0).toLowerCase() + alert.who.slice(1) + ".", "on");
    beep();
  }

  function revise(alert) {
    if (!alert || !alert.alert_id) { return; }
    var shown = null;
    Array.prototype.forEach.call(list.querySelectorAll("[data-alert-id]"), function (li) {
      if (li.getAttribute("data-alert-id") === alert.alert_id) { shown = li; }
    });
    if (!shown) { return; }  // not on this page: the list shows it as it is when reloaded
    list.replaceChild(item(alert, "Atualizado"), shown);
    var what = alert.unsettled === "retirado" ? "Alerta retirado" : "Alerta confirmado";
    setStatus(what + ": " + alert.kind_label + ", " + alert.who.charAt(0).toLowerCase() + alert.who.slice(1) + ".", "on");
  }

  function markRead() {
    if (document.visibilityState === "visible" && unread) {
      unread = 0;
      document.title = baseTitle;
    }
  }
  document.addEventListener("visibilitychange", markRead);
  window.addEventListener("focus", markRead);

  var source = new EventSource(list.getAttribute("data-stream"));
  setStatus("Conectando aos alertas ao vivo…", "wait");
  source.addEventListener("open", function () {
    setStatus("Conectado: novos alertas aparecem no topo da lista.", "on");
    list.setAttribute("data-live", "on");
  });
  source.addEventListener("alert", function (event) {
    try { add(JSON.parse(event.data)); } catch (e) { /* a malformed event is skipped */ }
  });
  source.addEventListener("revision", function (event) {
    try { revise(JSON.parse(event.data)); } catch (e) { /* a malformed event is skipped */ }
  });
  source.addEventListener("closed", function () {
    source.close();
    list.setAttribute("data-live", "off");
    setStatus("A sessão terminou: entre novamente para receber alertas.", "off");
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      list.setAttribute("data-live", "off");
      setStatus("Alertas ao vivo indisponíveis: recarregue a página.", "off");
    } else {
      setStatus("Conexão perdida; reconectando…", "wait");
    }
  });
})();
