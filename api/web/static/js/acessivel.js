/* Táxi acessível perto de você: the search from the browser's location (with consent), a point
 * tapped on the map, or a stand of the list, answered by /acessivel/resultados (the public API's
 * rules: positions of the public grid only) without leaving the page. Without this script the
 * stand form still works (a plain GET of /acessivel). A position leaves the browser rounded to
 * 0.001° (about 110 m), as the page promises: the server, its logs and any cache never see the
 * exact one (the server then takes the centre of its public cell). */
(function () {
  "use strict";
  var form = document.getElementById("form-ponto");
  var select = document.getElementById("ponto");
  var radius = document.getElementById("raio");
  var results = document.getElementById("resultados");
  var status = document.getElementById("busca-estado");
  var locate = document.getElementById("localizar");
  var locateButton = document.getElementById("usar-localizacao");
  if (!form || !results || !window.fetch) return;

  function coarse(degrees) {
    return degrees.toFixed(3);
  }

  function say(text) {
    if (status) status.textContent = text;
  }

  var map = null;
  var found = null;
  var box = document.getElementById("mapa-cidadao");
  if (box && window.L) {
    map = L.map(box, { zoomControl: false });
    L.control.zoom({ zoomInTitle: "Aproximar", zoomOutTitle: "Afastar" }).addTo(map);
    map.attributionControl.setPrefix("Leaflet");
    if (window.PontualMapaBase) window.PontualMapaBase.add(map);
    var stands = L.featureGroup();
    Array.prototype.forEach.call(select.options, function (option) {
      if (!option.value) return;
      var lat = Number(option.getAttribute("data-lat"));
      var lon = Number(option.getAttribute("data-lon"));
      L.circleMarker([lat, lon], { radius: 7, color: "#ffffff", weight: 2, fillColor: "#0b3d66", fillOpacity: 1 })
        .bindTooltip(option.textContent)
        .on("click", function (e) {
          L.DomEvent.stopPropagation(e);
          select.value = option.value;
          search({ ponto: option.value });
        })
        .addTo(stands);
    });
    stands.addTo(map);
    if (stands.getLayers().length) map.fitBounds(stands.getBounds(), { padding: [16, 16], maxZoom: 15 });
    else map.setView([-15.8, -47.9], 4);
    // One Tab stop for the map, not one per stand (drawn once the map has a view): the list
    // beside it is the keyboard's way to choose a stand.
    stands.eachLayer(function (marker) {
      var path = marker.getElement();
      if (path) path.setAttribute("tabindex", "-1");
    });
    found = L.featureGroup().addTo(map);
    map.on("click", function (e) {
      search({ lat: coarse(e.latlng.lat), lon: coarse(e.latlng.lng), origem: "mapa" });
    });
  }

  function draw() {
    if (!map) return;
    found.clearLayers();
    var body = results.querySelector(".results__body");
    if (!body) return;
    var here = [Number(body.getAttribute("data-here-lat")), Number(body.getAttribute("data-here-lon"))];
    L.circleMarker(here, { radius: 9, color: "#ffffff", weight: 3, fillColor: "#c2185b", fillOpacity: 1 })
      .bindTooltip("Local da busca (arredondado)")
      .addTo(found);
    Array.prototype.forEach.call(results.querySelectorAll(".result--taxi"), function (item) {
      var title = item.querySelector(".result__title");
      L.circleMarker([Number(item.getAttribute("data-lat")), Number(item.getAttribute("data-lon"))], {
        radius: 8, color: "#ffffff", weight: 2, fillColor: "#6a1b9a", fillOpacity: 1,
      })
        .bindTooltip(title ? title.textContent : "Táxi acessível")
        .addTo(found);
    });
    var bounds = found.getBounds();
    Array.prototype.forEach.call(results.querySelectorAll(".result--stand"), function (item) {
      bounds.extend([Number(item.getAttribute("data-lat")), Number(item.getAttribute("data-lon"))]);
    });
    map.fitBounds(bounds, { padding: [24, 24], maxZoom: 16 });
  }

  function summary() {
    var body = results.querySelector(".results__body");
    if (!body) {
      var alert = results.querySelector("[role=alert]");
      return alert ? alert.textContent : "";
    }
    var taxis = Number(body.getAttribute("data-taxis"));
    var places = Number(body.getAttribute("data-stands"));
    var stands = body.hasAttribute("data-stands-cut") ? "os " + places + " pontos de táxi mais próximos" :
      (places === 1 ? "1 ponto de táxi" : places + " pontos de táxi");
    return (taxis === 1 ? "1 táxi acessível livre" : taxis + " táxis acessíveis livres") + " e " +
      stands + " encontrados.";
  }

  var last = null; // the last search's point or stand: a new distance searches it again

  function search(params, keepFocus) {
    last = params;
    params.raio = radius.value;
    var query = Object.keys(params).map(function (k) {
      return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]);
    }).join("&");
    say("Buscando…");
    results.setAttribute("aria-busy", "true");
    fetch("/acessivel/resultados?" + query, { cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (response) {
        return response.text();
      })
      .then(function (html) {
        results.innerHTML = html;
        results.removeAttribute("aria-busy");
        // the address is the search: kept by a bookmark, a reload, a shared link, "Voltar"
        if (window.history && history.replaceState) history.replaceState(null, "", "/acessivel?" + query);
        draw();
        say(summary());
        var heading = results.querySelector("h2");
        if (heading && !keepFocus) heading.focus();
      })
      .catch(function () {
        results.removeAttribute("aria-busy");
        say("Sem resposta do servidor. Verifique a conexão e tente de novo.");
      });
  }

  // A distance changed after a search applies at once (it said "até 1 km" under "5 km"); the
  // focus stays on the list, the status line says what was found.
  radius.addEventListener("change", function () {
    if (last) search(last, true);
  });

  form.addEventListener("submit", function (event) {
    if (!select.value) return;
    event.preventDefault();
    search({ ponto: select.value });
  });

  if (locate && locateButton && navigator.geolocation) {
    locate.hidden = false;
    locateButton.addEventListener("click", function () {
      say("Pedindo a sua localização ao navegador…");
      navigator.geolocation.getCurrentPosition(
        function (position) {
          search({
            lat: coarse(position.coords.latitude),
            lon: coarse(position.coords.longitude),
            origem: "localizacao",
          });
        },
        function (error) {
          say(
            (error.code === 1
              ? "Sem permissão para usar a sua localização."
              : "Não foi possível saber a sua localização agora.") +
              " Toque no mapa ou escolha um ponto de táxi da lista."
          );
        },
        { enableHighAccuracy: false, timeout: 15000, maximumAge: 60000 }
      );
    });
  }

  draw();
})();
