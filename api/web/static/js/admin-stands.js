/* Administração › pontos: the stands map, and the drawing of a stand's area (Leaflet + Geoman).
 *
 * <div id="mapa" data-geojson-url=…> draws the active stands (a click opens the stand's page).
 * With data-editable="true" it also draws the area of the form (#form-ponto): a polygon from the
 * "vertices" field (one "latitude, longitude" a line) or a circle from "lat", "lon", "radius_m",
 * as chosen by the "mode" radios. Drawing or editing on the map fills the fields; typing in the
 * fields redraws the map: the fields are the keyboard's way to the same result, and the only
 * thing the server reads. No network but this server (the background: mapa-base.js).
 */
(function () {
  "use strict";
  var el = document.getElementById("mapa");
  if (!el || !window.L) return;

  var STAND_STYLE = { color: "#52606d", weight: 2, fillOpacity: 0.25, pmIgnore: true };
  var EDIT_STYLE = { color: "#d9480f", weight: 3, fillOpacity: 0.3 };
  var DEFAULT_VIEW = [-30.0346, -51.2177]; // Porto Alegre
  var editable = el.getAttribute("data-editable") === "true";
  var current = el.getAttribute("data-current") || "";

  var map = L.map(el, { zoomControl: false, keyboard: true }).setView(DEFAULT_VIEW, 13);
  L.control.zoom({ zoomInTitle: "Aproximar", zoomOutTitle: "Afastar" }).addTo(map);
  map.attributionControl.setPrefix("Leaflet");
  if (window.PontualMapaBase) window.PontualMapaBase.add(map);
  var context = L.featureGroup().addTo(map);
  var drawn = null; // the layer of the area being edited

  function standPopup(props) {
    var box = document.createElement("div");
    box.className = "map-popup";
    var link = document.createElement("a");
    link.href = "/admin/pontos/" + encodeURIComponent(props.stand_id);
    link.textContent = "Ponto " + props.stand_id;
    box.appendChild(link);
    if (props.name) {
      var name = document.createElement("p");
      name.textContent = props.name;
      box.appendChild(name);
    }
    return box;
  }

  // The stands of the municipality with the most of them: a registry of two cities far apart
  // would otherwise open on the whole world.
  function mainBounds(features) {
    var counts = {};
    var best = null;
    features.forEach(function (f) {
      var code = f.properties.municipality_code || "";
      counts[code] = (counts[code] || 0) + 1;
      if (best === null || counts[code] > counts[best]) best = code;
    });
    var layer = L.geoJSON({
      type: "FeatureCollection",
      features: features.filter(function (f) {
        return (f.properties.municipality_code || "") === best;
      }),
    });
    return layer.getLayers().length && layer.getBounds().isValid() ? layer.getBounds() : null;
  }

  function loadStands() {
    var url = el.getAttribute("data-geojson-url");
    if (!url) return;
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.ok ? r.json() : { features: [] };
      })
      .then(function (data) {
        var others = (data.features || []).filter(function (f) {
          return f.geometry && f.properties.stand_id !== current;
        });
        L.geoJSON(
          { type: "FeatureCollection", features: others },
          {
            pmIgnore: true,
            style: function () {
              return STAND_STYLE;
            },
            onEachFeature: function (feature, layer) {
              layer.bindPopup(standPopup(feature.properties));
              layer.bindTooltip(String(feature.properties.stand_id));
              // Chromium makes each clickable shape a tab stop: hundreds of unnamed stops
              // before the search; the list below has every stand for the keyboard.
              layer.on("add", function () {
                var path = layer.getElement();
                if (path) path.setAttribute("tabindex", "-1");
              });
            },
          }
        ).addTo(context);
        if (!drawn && context.getLayers().length && context.getBounds().isValid()) {
          map.fitBounds(mainBounds(others) || context.getBounds(), { maxZoom: 16, animate: false });
        }
        el.setAttribute("data-loaded", "true");
      })
      .catch(function () {
        el.setAttribute("data-loaded", "error");
      });
  }

  loadStands();
  if (!editable) return;

  // --- the form's area ---------------------------------------------------------------------
  var form = document.getElementById("form-ponto");
  if (!form) return;
  var field = function (name) {
    return form.querySelector('[name="' + name + '"]');
  };
  var vertices = field("vertices");
  var lat = field("lat");
  var lon = field("lon");
  var radius = field("radius_m");
  var modes = form.querySelectorAll("[data-area-mode]");

  function mode() {
    for (var i = 0; i < modes.length; i++) if (modes[i].checked) return modes[i].value;
    return "poligono";
  }
  function setMode(value) {
    for (var i = 0; i < modes.length; i++) modes[i].checked = modes[i].value === value;
    showMode();
  }
  function showMode() {
    var sections = form.querySelectorAll("[data-area-section]");
    for (var i = 0; i < sections.length; i++) {
      sections[i].hidden = sections[i].getAttribute("data-area-section") !== mode();
    }
  }

  function num(text) {
    var value = String(text || "").trim().replace(",", ".");
    return value === "" ? NaN : Number(value);
  }
  function parseVertices(text) {
    var body = String(text || "").trim();
    if (body.charAt(0) === "{") {
      try {
        return L.geoJSON(JSON.parse(body)).getLayers()[0] || null;
      } catch (e) {
        return null;
      }
    }
    var points = [];
    var lines = body.split(/\n/);
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i].trim();
      if (!line) continue;
      var parts = line.indexOf(";") >= 0 ? line.split(";") : line.replace(/,/g, " ").split(/\s+/);
      parts = parts.filter(function (p) {
        return p.trim() !== "";
      });
      if (parts.length !== 2) return null;
      var a = num(parts[0]);
      var b = num(parts[1]);
      if (!isFinite(a) || !isFinite(b)) return null;
      points.push([a, b]);
    }
    return points.length >= 3 ? L.polygon(points) : null;
  }

  function fixed(n) {
    return n.toFixed(7);
  }
  function writeFields(layer) {
    if (layer instanceof L.Circle) {
      var c = layer.getLatLng();
      lat.value = fixed(c.lat);
      lon.value = fixed(c.lng);
      radius.value = String(Math.round(layer.getRadius() * 10) / 10);
      setMode("ponto");
    } else {
      var rings = layer.getLatLngs();
      while (rings.length && Array.isArray(rings[0]) && Array.isArray(rings[0][0])) {
        rings = rings[0]; // a multipolygon's first part
      }
      var ring = Array.isArray(rings[0]) ? rings[0] : rings;
      vertices.value = ring
        .map(function (p) {
          return fixed(p.lat) + ", " + fixed(p.lng);
        })
        .join("\n");
      setMode("poligono");
    }
  }

  function adopt(layer) {
    if (drawn && drawn !== layer) map.removeLayer(drawn);
    drawn = layer;
    if (!layer) return;
    layer.setStyle(EDIT_STYLE);
    if (!map.hasLayer(layer)) layer.addTo(map);
    el.setAttribute("data-drawn", layer instanceof L.Circle ? "circle" : "polygon");
    layer.on("pm:edit pm:dragend pm:rotateend", function () {
      writeFields(layer);
    });
  }

  function drawFromFields() {
    var layer = null;
    if (mode() === "ponto") {
      var a = num(lat.value);
      var b = num(lon.value);
      var r = num(radius.value);
      if (isFinite(a) && isFinite(b) && isFinite(r) && r > 0) layer = L.circle([a, b], { radius: r });
    } else {
      layer = parseVertices(vertices.value);
    }
    if (layer) {
      adopt(layer);
    } else if (drawn) {
      map.removeLayer(drawn);
      drawn = null;
      el.removeAttribute("data-drawn");
    }
    return layer;
  }

  map.pm.setLang("pt_br");
  map.pm.addControls({
    position: "topleft",
    drawMarker: false,
    drawCircleMarker: false,
    drawPolyline: false,
    drawRectangle: true,
    drawPolygon: true,
    drawCircle: true,
    drawText: false,
    editMode: true,
    dragMode: true,
    cutPolygon: false,
    removalMode: true,
    rotateMode: false,
  });
  map.pm.setGlobalOptions({ pathOptions: EDIT_STYLE, snappable: true });
  // Geoman's buttons are links named only by their container's title: name them.
  var containers = el.querySelectorAll(".leaflet-pm-toolbar .button-container[title]");
  for (var c = 0; c < containers.length; c++) {
    var button = containers[c].querySelector(".leaflet-buttons-control-button");
    if (button) button.setAttribute("aria-label", containers[c].getAttribute("title"));
  }

  map.on("pm:create", function (event) {
    adopt(event.layer);
    writeFields(event.layer);
  });
  map.on("pm:remove", function (event) {
    if (event.layer === drawn) {
      drawn = null;
      vertices.value = "";
      el.removeAttribute("data-drawn");
    }
  });

  for (var i = 0; i < modes.length; i++) {
    modes[i].addEventListener("change", function () {
      showMode();
      drawFromFields();
    });
  }
  [vertices, lat, lon, radius].forEach(function (input) {
    input.addEventListener("change", drawFromFields);
  });

  showMode();
  var first = drawFromFields();
  if (first) map.fitBounds(first.getBounds(), { maxZoom: 18, padding: [40, 40], animate: false });
})();
