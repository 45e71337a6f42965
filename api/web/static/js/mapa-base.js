/* The background of every map of the console: PontualMapaBase.add(map) after L.map(...).
 *
 * Reads <meta name="pontual-mapa-base" content="/mapa-base.geojson" data-tiles data-attribution>
 * (base.html). With a tile URL configured (PONTUAL_TILES_URL) it draws those tiles; otherwise
 * the offline basemap of this server: the municipality's surface and boundary and, where the
 * road network is bundled, the roads, fetched for the view (widened by half) and again when
 * the view leaves the box fetched or the zoom changes by two levels. Drawn in a pane beneath
 * the data (no clicks, no keyboard focus), thin and grey. The legend entries are in the pages
 * (_macros.html basemap_legend): an entry whose layer the answer lacks is hidden.
 */
(function () {
  "use strict";
  var STYLE = {
    area: { stroke: false, fill: true, fillColor: "#fbfaf6", fillOpacity: 1 },
    limit: { color: "#7b8290", weight: 1.5, dashArray: "6 4", fill: false },
    local: { color: "#c4c9d1", weight: 1, fill: false },
    principal: { color: "#9aa1ab", weight: 2, fill: false },
  };

  function config() {
    var meta = document.querySelector('meta[name="pontual-mapa-base"]');
    if (!meta) return null;
    return {
      url: meta.getAttribute("content"),
      tiles: meta.getAttribute("data-tiles") || "",
      attribution: meta.getAttribute("data-attribution") || "",
    };
  }

  function style(feature) {
    var p = feature.properties || {};
    return STYLE[p.layer === "road" ? p["class"] : p.layer] || STYLE.local;
  }

  function showLegend(features) {
    var has = {};
    features.forEach(function (f) {
      has[f.properties.layer === "road" ? "road" : "area"] = true;
    });
    var items = document.querySelectorAll("[data-mapa-base-item]");
    for (var i = 0; i < items.length; i++) {
      items[i].hidden = !has[items[i].getAttribute("data-mapa-base-item")];
    }
  }

  function add(map) {
    var cfg = config();
    if (!map || !cfg) return null;
    if (cfg.tiles) {
      map.getContainer().setAttribute("data-mapa-base", "tiles");
      return L.tileLayer(cfg.tiles, { attribution: cfg.attribution, maxZoom: 19 }).addTo(map);
    }
    var pane = map.createPane("mapa-base");
    pane.style.zIndex = 250; // above the tile pane (200), beneath the data (overlayPane 400)
    pane.style.pointerEvents = "none";
    var layer = L.geoJSON(null, { pane: "mapa-base", interactive: false, style: style }).addTo(map);
    var loaded = null; // {bounds, zoom} of the last answer
    var credited = "";
    var pending = 0;

    function refresh() {
      var view = map.getBounds();
      var zoom = map.getZoom();
      if (loaded && loaded.bounds.contains(view) && Math.abs(loaded.zoom - zoom) < 2) return;
      var box = view.pad(0.5);
      var bbox = [
        Math.max(-180, box.getWest()), Math.max(-90, box.getSouth()),
        Math.min(180, box.getEast()), Math.min(90, box.getNorth()),
      ].map(function (v) { return v.toFixed(5); }).join(",");
      var ticket = ++pending;
      fetch(cfg.url + "?bbox=" + encodeURIComponent(bbox), { credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (data) {
          if (ticket !== pending) return;
          layer.clearLayers();
          layer.addData(data);
          showLegend(data.features);
          loaded = { bounds: L.latLngBounds([data.bbox[1], data.bbox[0]], [data.bbox[3], data.bbox[2]]), zoom: zoom };
          if (map.attributionControl && data.attribution !== credited) {
            if (credited) map.attributionControl.removeAttribution(credited);
            credited = data.attribution;
            if (credited) map.attributionControl.addAttribution(credited);
          }
          map.getContainer().setAttribute("data-mapa-base", "true");
        })
        .catch(function () {
          if (ticket === pending) map.getContainer().setAttribute("data-mapa-base", "erro");
        });
    }

    map.on("moveend", refresh);
    map.whenReady(refresh);
    return layer;
  }

  window.PontualMapaBase = { add: add };
})();
