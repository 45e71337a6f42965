/* Evidence map of a finding or a proposal (Leaflet; the background of mapa-base.js).
 *
 * Reads the layers from the map element's data-camadas (JSON: {layers: [{id, label, data}]},
 * positions as [lon, lat]); draws the stand and the finding's polygons, the vehicle's track,
 * a detour's lines (driven, matched, reference, fastest) and the finding's fixes (numbered,
 * their time in a tooltip), fitted to the view with no marker under a control; a stand or an
 * area too small to see at that scale gets a ring of fixed size. The legend and
 * the table of fixes are in the page itself; colours match fiscal.css's .swatch--* classes.
 *
 * Keyboard and screen readers: the map is one Tab stop (arrows pan, + and − zoom). The markers
 * are not: a detour has up to 80 fixes, and each would be a nameless stop to tab through. The
 * same positions (number, local time, coordinates, meter) are in the page's table of fixes,
 * which reads in order; so the markers leave the tab order and the accessibility tree (a tap
 * or the pointer still shows a fix's time).
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
  // stand or a finding's area it frames the evidence there (the stand, the area, the numbered
  // fixes, the finding's place): the vehicle's whole track around them would shrink them to
  // one dot. Elsewhere (a detour's lines) it frames everything.
  var atPlace = layers.some(function (layer) { return layer.id === "stand" || layer.id === "area"; });
  var FOCUS = atPlace ? {stand: true, area: true, fixes: true, point: true} : {};
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

  // Framing. Around the evidence: room for a marker (REACH px from its centre) and, when the
  // few fixes carry permanent labels to the right of their points, for the labels. A corner's
  // controls (the zoom buttons top right, the attribution bottom right) are kept clear of by
  // padding either their side of the map (by their height) or their edge (by their width): of
  // these choices, the one that shows the evidence largest.
  var REACH = 12;
  var LABEL_PX = 120;
  function reach(side) { return side === "right" && spec.labelled ? LABEL_PX : REACH; }
  function corners() {
    var outer = box.getBoundingClientRect();
    var found = [];
    var elements = box.querySelectorAll(".leaflet-control-container > .leaflet-top, .leaflet-control-container > .leaflet-bottom");
    Array.prototype.forEach.call(elements, function (el) {
      var r = el.getBoundingClientRect();
      if (!r.width || !r.height) { return; }
      var top = el.classList.contains("leaflet-top");
      var right = el.classList.contains("leaflet-right");
      found.push([
        {side: top ? "top" : "bottom", px: top ? r.bottom - outer.top : outer.bottom - r.top},
        {side: right ? "right" : "left", px: right ? outer.right - r.left : r.right - outer.left}
      ]);
    });
    return found;
  }
  function frame() {
    var size = map.getSize();
    var options = corners();
    var best = null;
    for (var mask = 0; mask < (1 << options.length); mask++) {
      var pad = {top: 24, bottom: 24, left: 24, right: spec.labelled ? LABEL_PX : 24};
      options.forEach(function (choices, k) {
        var pick = choices[(mask >> k) & 1];
        pad[pick.side] = Math.max(pad[pick.side], pick.px + reach(pick.side));
      });
      var across = L.point(pad.left + pad.right, pad.top + pad.bottom);
      if (across.x > size.x - 16 || across.y > size.y - 16) { continue; }
      var zoom = map.getBoundsZoom(bounds, false, across);
      if (!best || zoom > best.zoom) { best = {zoom: zoom, pad: pad}; }
    }
    var chosen = best ? best.pad : {top: 24, bottom: 24, left: 24, right: 24};
    map.fitBounds(bounds, {
      paddingTopLeft: [chosen.left, chosen.top],
      paddingBottomRight: [chosen.right, chosen.bottom],
      maxZoom: 18,
      animate: false
    });
    framed = sizes();
  }
  // Framed again while nobody has moved the map when the controls or the map change size
  // (the basemap's attribution arrives later; a phone turns).
  var framed = "";
  var touched = false;
  function sizes() {
    return corners().map(function (c) { return c[0].px + "x" + c[1].px; }).join(",") +
      "|" + box.clientWidth + "x" + box.clientHeight;
  }
  ["pointerdown", "touchstart", "wheel", "keydown"].forEach(function (type) {
    box.addEventListener(type, function () { touched = true; }, {passive: true});
  });
  if (window.ResizeObserver) {
    var watch = new ResizeObserver(function () {
      if (touched || !bounds.isValid() || sizes() === framed) { return; }
      map.invalidateSize(false);
      frame();
    });
    watch.observe(box);
    Array.prototype.forEach.call(box.querySelectorAll(".leaflet-control"), function (el) { watch.observe(el); });
  }

  if (bounds.isValid()) {
    frame();
  } else {
    map.setView([0, 0], 2);
  }

  // A stand or an area a few pixels across at the view's scale (a week's track around it) is
  // marked by a ring of fixed size at its centre, so that it never vanishes under the track.
  var MIN_SHAPE_PX = 14;
  function keepVisible(polygon, style) {
    var ring = L.circleMarker(polygon.getBounds().getCenter(), {
      radius: 15, color: style.color, weight: 3, fill: false, interactive: false
    });
    function update() {
      var b = polygon.getBounds();
      var a = map.latLngToLayerPoint(b.getNorthWest());
      var z = map.latLngToLayerPoint(b.getSouthEast());
      var small = Math.max(Math.abs(z.x - a.x), Math.abs(z.y - a.y)) < MIN_SHAPE_PX;
      if (small && !map.hasLayer(ring)) {
        ring.addTo(map);
        var el = ring.getElement();
        if (el) { el.setAttribute("aria-hidden", "true"); el.classList.add("shape-ring"); }
      } else if (!small && map.hasLayer(ring)) {
        map.removeLayer(ring);
      }
    }
    map.on("zoomend", update);
    update();
  }

  layers.forEach(function (layer) {
    var style = STYLE[layer.id] || {color: "#1b1f24"};
    var drawn;
    if (layer.id === "stand" || layer.id === "area") {
      drawn = L.polygon(layer.data.map(latlng), style);
      keepVisible(drawn, style);
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
    if (layer.id === "fixes" || layer.id === "point") {
      // not a Tab stop each (Leaflet makes a marker with a tooltip focusable): see the top
      var markers = layer.id === "fixes" ? drawn.getLayers() : [drawn];
      markers.forEach(function (marker) {
        var el = marker.getElement();
        if (!el) { return; }
        el.setAttribute("tabindex", "-1");
        el.setAttribute("aria-hidden", "true");
        el.classList.add(layer.id === "fixes" ? "fix-marker" : "point-marker");
      });
    }
  });
})();
