/* Planejamento: the planner map (vendored Leaflet, background of mapa-base.js) from the plan's GeoJSON layers
 * (data-map-url): municipal boundary, walking coverage, pickups per H3 cell (colour classes
 * heat-1…6 as in the legend), stands, candidate sites. Details of an element on click/tap. */
(function () {
  "use strict";
  var box = document.getElementById("mapa-planejamento");
  if (!box || !window.L || !window.fetch) return;
  var state = document.getElementById("mapa-estado");
  var HEAT = ["#fff5eb", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#8c2d04"];
  var ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function esc(v) {
    return String(v === null || v === undefined ? "—" : v).replace(/[&<>"']/g, function (c) {
      return ESC[c];
    });
  }
  function num(v, digits) {
    if (v === null || v === undefined) return "—";
    return Number(v).toLocaleString("pt-BR", { maximumFractionDigits: digits || 0 });
  }
  function count(n, one, many) {
    return num(n) + " " + (n === 1 ? one : many);
  }
  function table(title, rows) {
    var html = "<strong>" + esc(title) + "</strong><table class='popup-table'>";
    for (var k = 0; k < rows.length; k++) {
      html += "<tr><th scope='row'>" + esc(rows[k][0]) + "</th><td>" + esc(rows[k][1]) + "</td></tr>";
    }
    return html + "</table>";
  }
  function say(text) {
    if (state) state.textContent = text;
  }

  var map = L.map(box, { zoomControl: false, preferCanvas: false });
  L.control.zoom({ zoomInTitle: "Aproximar", zoomOutTitle: "Afastar" }).addTo(map);
  map.attributionControl.setPrefix("Leaflet");
  if (window.PontualMapaBase) window.PontualMapaBase.add(map);
  map.setView([-15.8, -47.9], 4);

  fetch(box.getAttribute("data-map-url"), { credentials: "same-origin", cache: "no-store" })
    .then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    })
    .then(function (data) {
      var layers = data.layers;
      L.geoJSON(layers.boundary, {
        style: { color: "#555555", weight: 2, fill: false },
        interactive: false,
      }).addTo(map);
      L.geoJSON(layers.coverage, {
        style: { color: "#1f78b4", weight: 1, fillColor: "#a6cee3", fillOpacity: 0.45 },
        interactive: false,
      }).addTo(map);
      L.geoJSON(layers.stands, {
        style: { color: "#0b3d66", weight: 2, fillColor: "#0b3d66", fillOpacity: 0.7 },
        onEachFeature: function (f, layer) {
          var p = f.properties;
          var popup = table("Ponto " + p.stand_id, [["Nome", p.name], ["Vagas", num(p.capacity)]]);
          layer.bindPopup(popup);
          // A stand is a few metres wide: a dot at its centre keeps it visible zoomed out.
          var centre = layer.getBounds ? layer.getBounds().getCenter() : layer.getLatLng();
          L.circleMarker(centre, { radius: 5, color: "#ffffff", weight: 1, fillColor: "#0b3d66", fillOpacity: 1 })
            .bindPopup(popup)
            .addTo(map);
        },
      }).addTo(map);
      L.geoJSON(layers.cells, {
        style: function (f) {
          return { color: "#7f2704", weight: 0.5, fillColor: HEAT[f.properties.heat] || HEAT[0], fillOpacity: 0.7 };
        },
        onEachFeature: function (f, layer) {
          var p = f.properties;
          var popup = table("Célula H3 " + p.cell, [
            ["Embarques", num(p.pickups)],
            ["Pontos a pé", num(p.stands_nearby)],
            ["Vagas a pé", num(p.spaces)],
            ["Embarques/(vagas+1)", num(p.lack_score, 1)],
          ]);
          layer.bindPopup(popup);
          // A cell is a block wide: a dot at its centre, above the stands, keeps the demand in
          // sight on the whole city's map.
          L.circleMarker(layer.getBounds().getCenter(), {
            radius: 6, color: "#7f2704", weight: 1.5, fillColor: HEAT[p.heat] || HEAT[0], fillOpacity: 1,
          })
            .bindPopup(popup)
            .addTo(map);
        },
      }).addTo(map);
      L.geoJSON(layers.candidates, {
        pointToLayer: function (f, latlng) {
          return L.circleMarker(latlng, { radius: 8, color: "#ffffff", weight: 2, fillColor: "#6a3d9a", fillOpacity: 0.9 });
        },
        onEachFeature: function (f, layer) {
          var p = f.properties;
          layer.bindPopup(table("Local candidato", [
            ["Dias com formação irregular", num(p.n_days)],
            ["Veículos", num(p.n_vehicles)],
            ["Ponto mais próximo", p.nearest_stand_m === null ? "—" : num(p.nearest_stand_m) + " m"],
          ]));
        },
      }).addTo(map);
      box.setAttribute("data-ready", "true");
      if (!data.bounds) {
        // Nothing to frame: the map of Brazil stays, and says why it is empty.
        say(
          "Nada a mostrar no mapa deste município: o sistema não tem o seu limite municipal, e o " +
            "cadastro não tem nele pontos, embarques nem locais candidatos."
        );
        return;
      }
      map.fitBounds(data.bounds, { padding: [12, 12], maxZoom: 16 });
      say(
        "Mapa com " + count(layers.cells.features.length, "célula", "células") + " com embarques, " +
          count(layers.stands.features.length, "ponto", "pontos") + " e " +
          count(layers.candidates.features.length, "local candidato", "locais candidatos") + "."
      );
    })
    .catch(function () {
      say("O mapa não pôde ser carregado. Os números do plano estão nas tabelas desta página.");
    });
})();
