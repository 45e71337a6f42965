/* Evidence map of a finding or a proposal (Leaflet; the background of mapa-base.js).
 *
 * Reads the layers from the map element's data-camadas (JSON: {layers: [{id, label, data}]},
 * positions as [lon, lat]); draws the stand and the finding's polygons, the vehicle's track,
 * a detour's lines (driven, matched, reference, fastest) and the finding's fixes (numbered,
 * their time in a tooltip), fitted to the view. The legend and the table of fixes are in the
 * page itself; colours match fiscal.css's .swatch--* classes.
 */
(function () {
  "use strict";

  var box = document.getElementById("mapa");
  if (!box || !window.L) { return; }
  var spec;
  try { spec = JSON.parse(box.getAttribute("data-camadas") || "{}"); } catch (e) { return; }
  var layers = spec.layers || [];
  if (!layers.length) { return; }
  document.documentElement.classList.add("map-js");

  var STYLE = {
    stand: {color: "#1b7a43", weight: 2, fillColor: "#2ca25f", fillOpacity: 0.3},
    area: {color: "#b2182b", weight: 2, fillColor: "#ef8a62", fillOpacity: 0.3},
    track: {color: "#5a6b7b", weight: 3, opacity: 0.9},
    segment: {color: "#1b1f24", weight: 3, dashArray: "1 6", opacity: 0.9},
    driven_line: {color: "#1f5fbf", weight: 5, opacity: 0.85},
    matched_line: {color: "#0b7d7d", weight: 4, dashArray: "2 7", opacity: 0.95},
    reference_line: {color: "#c2410c", weight: 4, dashArray: "10 7", opacity: 0.95},
    fastest_route_line: {color: "#7e22ce", weight: 4, dashArray: "4 6 12 6", opacity: 0.9},
    fixes: {radius: 5, color: "#ffffff", weight: 2, fillColor: "#1b1f24", fillOpacity: 1},
    point: {radius: 8, color: "#ffffff", weight: 2, fillColor: "#c0392b", fillOpacity: 1}
  };

  function latlng(p) { return [p[1], p[0]]; }

  var map = L.map(box, {
    zoomControl: true,
    attributionControl: true,
    zoomSnap: 0.25,
    keyboard: true
  });
  map.zoomControl.setPosition("topright");
  if (map.zoomControl._zoomInButton) {
    map.zoomControl._zoomInButton.title = "Aproximar";
    map.zoomControl._zoomInButton.setAttribute("aria-label", "Aproximar");
    map.zoomControl._zoomOutButton.title = "Afastar";
    map.zoomControl._zoomOutButton.setAttribute("aria-label", "Afastar");
  }
  map.attributionControl.setPrefix("Leaflet");
  if (window.PontualMapaBase) { window.PontualMapaBase.add(map); }

  // The view first (Leaflet draws a path only on a map that has one), then the layers. At a
  // stand it frames the evidence there (the stand, the numbered fixes, the finding's place):
  // the vehicle's whole track around them would shrink them to one dot. Elsewhere (a detour's
  // lines) it frames everything.
  var atStand = layers.some(function (layer) { return layer.id === "stand"; });
  var FOCUS = atStand ? {stand: true, fixes: true, point: true} : {};
  function extend(bounds, layer) {
    if (layer.id === "fixes") {
      layer.data.forEach(function (fix) { bounds.extend([fix.lat, fix.lon]); });
    } else if (layer.id === "point") {
      bounds.extend(latlng(layer.data));
    } else {
      layer.data.forEach(function (p) { bounds.extend(latlng(p)); });
    }
  }
  var bounds = L.latLngBounds([]);
  layers.forEach(function (layer) { if (FOCUS[layer.id]) { extend(bounds, layer); } });
  if (!bounds.isValid()) {
    layers.forEach(function (layer) { extend(bounds, layer); });
  }
  if (bounds.isValid()) {
    // the permanent labels of few fixes stand to the right of their points: room for them
    // (and for the zoom buttons, top right), so a phone's narrow map does not cut them
    map.fitBounds(bounds, {
      paddingTopLeft: [24, spec.labelled ? 72 : 24],
      paddingBottomRight: [spec.labelled ? 120 : 24, 24],
      maxZoom: 18,
      animate: false
    });
  } else {
    map.setView([0, 0], 2);
  }

  layers.forEach(function (layer) {
    var style = STYLE[layer.id] || {color: "#1b1f24"};
    var drawn;
    if (layer.id === "stand" || layer.id === "area") {
      drawn = L.polygon(layer.data.map(latlng), style);
    } else if (layer.id === "fixes") {
      drawn = L.featureGroup(layer.data.map(function (fix) {
        var marker = L.circleMarker([fix.lat, fix.lon], style);
        if (spec.labelled) {
          // few fixes: each shows its number and time, as in the table below the map
          return marker.bindTooltip(fix.short, {permanent: true, direction: "right", className: "fix-label"});
        }
        return marker.bindTooltip(fix.label);
      }));
    } else if (layer.id === "point") {
      drawn = L.circleMarker(latlng(layer.data), style).bindTooltip(layer.label);
    } else {
      drawn = L.polyline(layer.data.map(latlng), style);
    }
    drawn.addTo(map);
  });
})();
