/* Pontual maps: canvas layers from compact columnar data, popups built on click, a legend and
 * a time slider. Plain ES5-compatible JS over Leaflet 1.9; no other dependency, no network.
 *
 * A layer spec (built by maps/_layers.py):
 *   {id, label, show, n, lon: [..]|null, lat: [..]|null, shapes: [geometry|null, ..]|null,
 *    props: {column: [..n values]}, style: {...}, style_by: {option: column},
 *    popup: {type: "fields", title: column, fields: [[column, label, format], ..]}
 *           | {type: <name of a renderer in PontualMaps.popups>},
 *    time: {start: column, window_s: number|null}|null, meta: {...}}
 * Row i is drawn as a circleMarker at (lat[i], lon[i]) when given, and as shapes[i] when given.
 */
(function () {
  "use strict";
  var P = (window.PontualMaps = window.PontualMaps || {});
  // Leaflet's own controls in pt-BR (folium makes them with Leaflet's English titles), set
  // before the page's map is made; the layer control's button is named where it is added.
  if (window.L && L.Control) {
    L.Control.Zoom.mergeOptions({ zoomInTitle: "Aproximar", zoomOutTitle: "Afastar" });
    L.Control.Attribution.mergeOptions({
      prefix: '<a href="https://leafletjs.com" title="Biblioteca JavaScript de mapas interativos">Leaflet</a>',
    });
  }
  P.maps = P.maps || {};
  P.popups = P.popups || {};
  P.ready = false;

  var ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function esc(v) {
    return String(v).replace(/[&<>"']/g, function (c) {
      return ESC[c];
    });
  }
  P.esc = esc;

  var formatters = {};
  function timeFormat(tz) {
    if (!formatters[tz]) {
      formatters[tz] = new Intl.DateTimeFormat("pt-BR", {
        timeZone: tz,
        day: "2-digit",
        month: "2-digit",
        year: "numeric",
        hour: "2-digit",
        minute: "2-digit",
      });
    }
    return formatters[tz];
  }
  P.formatTime = function (seconds, tz) {
    if (seconds === null || seconds === undefined) return "—";
    return timeFormat(tz).format(new Date(seconds * 1000));
  };

  function formatValue(value, format, tz) {
    if (value === null || value === undefined || value === "") return "—";
    switch (format) {
      case "time":
        return P.formatTime(value, tz);
      case "pct":
        return Math.round(value * 100) + "%";
      case "km":
        return (value / 1000).toLocaleString("pt-BR", { maximumFractionDigits: 2 }) + " km";
      case "min":
        return Math.round(value / 60) + " min";
      case "num":
        return Number(value).toLocaleString("pt-BR", { maximumFractionDigits: 2 });
      default:
        return esc(value);
    }
  }
  P.formatValue = formatValue;

  function row(layer, i) {
    var out = {};
    for (var key in layer.props) out[key] = layer.props[key][i];
    return out;
  }

  P.popups.fields = function (r, layer, tz) {
    var spec = layer.popup;
    var html = "";
    if (spec.title) html += "<b>" + esc(r[spec.title]) + "</b>";
    else if (spec.title_text) html += "<b>" + esc(spec.title_text) + "</b>";
    html += "<table class='pontual-popup'>";
    for (var k = 0; k < spec.fields.length; k++) {
      var f = spec.fields[k];
      var value = r[f[0]];
      if ((value === null || value === undefined) && f[3] === "skip_null") continue;
      html += "<tr><th>" + esc(f[1]) + "</th><td>" + formatValue(value, f[2], tz) + "</td></tr>";
    }
    return html + "</table>";
  };

  /* Stand popup (maps/stand.py): now, the queue, the period, the licensees' presence chart. */
  var PRESENCE = {
    P: ["#1a9850", "no ponto"],
    A: ["#d73027", "operou fora do ponto"],
    ".": ["#d9d9d9", "não operou"],
  };
  function presenceChart(licensees, days) {
    var cell = days.length <= 14 ? 14 : days.length <= 31 ? 9 : 5,
      gap = 1,
      labelW = 64,
      top = 14,
      rowH = cell + 3,
      keyW = 300;
    var gridW = labelW + days.length * (cell + gap);
    var width = Math.max(gridW, keyW);
    var height = top + licensees.length * rowH + 16;
    var svg =
      "<svg class='pontual-chart' role='img' width='" + width + "' height='" + height +
      "' viewBox='0 0 " + width + " " + height + "'><title>Presença dos licenciados por dia</title>";
    svg += "<text x='" + labelW + "' y='10'>" + esc(days[0]) + "</text>";
    if (days.length * (cell + gap) > 70)
      svg += "<text x='" + gridW + "' y='10' text-anchor='end'>" + esc(days[days.length - 1]) + "</text>";
    for (var k = 0; k < licensees.length; k++) {
      var y = top + k * rowH;
      svg += "<text x='0' y='" + (y + cell - 1) + "'>" + esc(licensees[k][0]) + "</text>";
      var codes = licensees[k][1];
      for (var d = 0; d < codes.length; d++) {
        var c = PRESENCE[codes.charAt(d)];
        if (!c) continue;
        svg +=
          "<rect x='" + (labelW + d * (cell + gap)) + "' y='" + y + "' width='" + cell +
          "' height='" + cell + "' fill='" + c[0] + "'><title>" + esc(licensees[k][0]) + " " +
          esc(days[d]) + ": " + c[1] + "</title></rect>";
      }
    }
    var ly = top + licensees.length * rowH + 12, lx = 0;
    for (var key in PRESENCE) {
      svg += "<rect x='" + lx + "' y='" + (ly - 8) + "' width='8' height='8' fill='" + PRESENCE[key][0] + "'></rect>";
      svg += "<text x='" + (lx + 11) + "' y='" + ly + "'>" + PRESENCE[key][1] + "</text>";
      lx += 11 + PRESENCE[key][1].length * 5.2 + 10;
    }
    return svg + "</svg>";
  }
  P.presenceChart = presenceChart;

  function vehicles(n, tz) {
    return formatValue(n, "num", tz) + (n === 1 ? " veículo" : " veículos");
  }

  P.popups.stand = function (r, layer, tz) {
    var meta = layer.meta || {};
    var html = "<b>" + esc(r.name) + "</b> <span>(ponto nº " + esc(r.stand_id) + ")</span>";
    html += "<table class='pontual-popup'>";
    html += "<tr><th>Capacidade</th><td>" +
      (r.capacity === null || r.capacity === undefined ? "não informada"
        : formatValue(r.capacity, "num", tz) + " vagas") + "</td></tr>";
    html +=
      "<tr><th>Agora (" + P.formatTime(meta.at, tz) + ")</th><td>" + vehicles(r.n_present, tz) +
      (r.util === null ? "" : " — " + formatValue(r.util, "pct", tz)) + "</td></tr>";
    if (r.intruders !== null) html += "<tr><th>Intrusos</th><td>" + r.intruders + "</td></tr>";
    if (r.peak !== null)
      html +=
        "<tr><th>Pico no período</th><td>" + vehicles(r.peak, tz) +
        (r.peak_util === null ? "" : " — " + formatValue(r.peak_util, "pct", tz)) + "</td></tr>";
    if (r.mean_util !== null)
      html += "<tr><th>Ocupação média</th><td>" + formatValue(r.mean_util, "pct", tz) + "</td></tr>";
    html += "</table>";
    if (r.queue.length) {
      html += "<table class='pontual-queue'><tr><th>Fila</th><th>Veículo</th><th>Espera</th><th></th></tr>";
      for (var k = 0; k < r.queue.length; k++) {
        var q = r.queue[k];
        var status = q[3] === false ? "<span class='pontual-intruder'>intruso (sem licença)</span>"
          : q[3] === true ? "licenciado" : "licença não informada";
        html += "<tr><td>" + q[0] + "º</td><td>" + esc(q[1]) + "</td><td>" +
          formatValue(q[2], "min", tz) + "</td><td>" + status + "</td></tr>";
      }
      html += "</table>";
    } else if (!r.n_present) {
      html += "<div>Nenhum veículo no ponto neste instante.</div>";
    }
    if (r.licensees.length && meta.days && meta.days.length) {
      var first = meta.days[0], last = meta.days[meta.days.length - 1];
      html += "<div class='pontual-chart-title'>Presença dos licenciados por dia, " +
        (first === last ? "em " + first : "de " + first + " a " + last) + "</div>";
      html += presenceChart(r.licensees, meta.days);
    } else if (meta.has_presence) {
      html += "<div>Sem licenciados neste ponto no período.</div>";
    }
    return html;
  };

  function styleFor(layer, i, renderer) {
    if (!layer._perRow && layer._shared) return layer._shared;
    var style = { renderer: renderer };
    for (var key in layer.style) style[key] = layer.style[key];
    for (var opt in layer.style_by || {}) style[opt] = layer.props[layer.style_by[opt]][i];
    layer._perRow = Object.keys(layer.style_by || {}).length > 0;
    if (!layer._perRow) layer._shared = style;
    return style;
  }

  function buildLayer(map, renderer, layer, tz) {
    var group = L.featureGroup();
    var items = new Array(layer.n);
    for (var i = 0; i < layer.n; i++) {
      var style = styleFor(layer, i, renderer);
      var parts = [];
      if (layer.shapes && layer.shapes[i]) {
        var shapeStyle = {};
        for (var s in style) shapeStyle[s] = style[s];
        if (layer.shape_style) for (var t in layer.shape_style) shapeStyle[t] = layer.shape_style[t];
        var shape = L.GeoJSON.geometryToLayer(layer.shapes[i], shapeStyle);
        shape._pontualRow = i;
        parts.push(shape);
      }
      if (layer.lat && layer.lat[i] !== null) {
        var marker = L.circleMarker([layer.lat[i], layer.lon[i]], style);
        marker._pontualRow = i;
        parts.push(marker);
      }
      for (var p = 0; p < parts.length; p++) group.addLayer(parts[p]);
      items[i] = parts;
    }
    if (layer.popup) {
      var render = P.popups[layer.popup.type];
      group.on("click", function (e) {
        var i = e.layer._pontualRow;
        if (i === undefined) return;
        var size = map.getSize(); // a phone: the popup scrolls inside, clear of the controls
        L.popup({
          maxWidth: Math.min(420, size.x - 80),
          maxHeight: Math.max(160, Math.round(size.y * 0.6)),
          autoPanPaddingTopLeft: L.point(50, 70)
        })
          .setLatLng(e.latlng)
          .setContent(render(row(layer, i), layer, tz, i))
          .openOn(map);
      });
    }
    return { group: group, items: items, spec: layer, shown: layer.n, lo: 0, hi: layer.n };
  }

  /* Legend: items [colour, text, layer id?, swatch?]; colour null makes a heading. An item
   * naming a layer is dimmed while that layer is off (layer control). Swatches: "box" (default),
   * "dot", "line", "dash". */
  /* Below this map width (a phone) the layer control and the legend start folded. */
  var NARROW_PX = 600;

  function legendControl(legend, folded) {
    var control = L.control({ position: "bottomright" });
    control.onAdd = function () {
      var div = L.DomUtil.create("div", "pontual-legend leaflet-control");
      var html = folded ? "" : "<b>" + esc(legend.title) + "</b>";
      for (var k = 0; k < legend.items.length; k++) {
        var it = legend.items[k];
        var data = it[2] ? " data-layer='" + esc(it[2]) + "'" : "";
        if (it[0] === null) {
          html += "<div class='pontual-legend-head'" + data + ">" + esc(it[1]) + "</div>";
          continue;
        }
        var swatch = it[3] || "box";
        var paint = swatch === "line" || swatch === "dash" ? "border-color:" : "background:";
        html +=
          "<div class='pontual-legend-item'" + data + "><span class='pontual-swatch pontual-swatch-" +
          esc(swatch) + "' style='" + paint + esc(it[0]) + "'></span>" + esc(it[1]) + "</div>";
      }
      if (legend.note) html += "<div class='pontual-note'>" + esc(legend.note) + "</div>";
      // On a phone the legend starts folded under its title, the map left to see.
      div.innerHTML = folded
        ? "<details><summary><b>" + esc(legend.title) + "</b></summary>" + html + "</details>"
        : html;
      L.DomEvent.disableScrollPropagation(div);
      L.DomEvent.disableClickPropagation(div);
      return div;
    };
    return control;
  }

  function syncLegend(state) {
    var box = state.map.getContainer().querySelector(".pontual-legend");
    if (!box) return;
    var rows = box.querySelectorAll("[data-layer]");
    for (var k = 0; k < rows.length; k++) {
      var built = state.layers[rows[k].getAttribute("data-layer")];
      if (!built) continue;
      var on = state.map.hasLayer(built.group);
      rows[k].className = rows[k].className.replace(/ ?pontual-off/g, "") + (on ? "" : " pontual-off");
    }
  }

  /* Time filtering: the rows of a timed layer, sorted by start; visible rows are those with
   * t - window < start <= t (window null: every row started by t). */
  function prepareTime(built) {
    var col = built.spec.props[built.spec.time.start];
    var order = [];
    for (var i = 0; i < built.spec.n; i++) if (col[i] !== null) order.push(i);
    order.sort(function (a, b) {
      return col[a] - col[b];
    });
    built.order = order;
    built.starts = order.map(function (i) {
      return col[i];
    });
    built.lo = 0;
    built.hi = order.length;
    // Rows without a time are always visible and never touched.
  }

  function bisectRight(arr, x) {
    var lo = 0,
      hi = arr.length;
    while (lo < hi) {
      var mid = (lo + hi) >>> 1;
      if (arr[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function setRange(built, lo, hi) {
    var group = built.group;
    function add(a, b) {
      for (var k = a; k < b; k++) {
        var parts = built.items[built.order[k]];
        for (var p = 0; p < parts.length; p++) group.addLayer(parts[p]);
      }
    }
    function remove(a, b) {
      for (var k = a; k < b; k++) {
        var parts = built.items[built.order[k]];
        for (var p = 0; p < parts.length; p++) group.removeLayer(parts[p]);
      }
    }
    // Remove what leaves [lo, hi), then add what enters it.
    if (lo > built.lo) remove(built.lo, Math.min(lo, built.hi));
    if (hi < built.hi) remove(Math.max(hi, built.lo), built.hi);
    if (lo < built.lo) add(lo, Math.min(built.lo, hi));
    if (hi > built.hi) add(Math.max(built.hi, lo), hi);
    built.lo = lo;
    built.hi = hi;
    built.shown = built.spec.n - built.order.length + Math.max(0, hi - lo);
  }

  function setTime(state, t) {
    state.t = t;
    for (var k = 0; k < state.timed.length; k++) {
      var built = state.timed[k];
      var w = built.spec.time.window_s;
      var hi = bisectRight(built.starts, t);
      var lo = w === null || w === undefined ? 0 : bisectRight(built.starts, t - w);
      setRange(built, Math.min(lo, hi), hi);
    }
    if (state.sliderLabel) state.sliderLabel.textContent = P.formatTime(t, state.tz);
  }

  function sliderControl(state, spec) {
    var control = L.control({ position: "bottomleft" });
    control.onAdd = function () {
      var div = L.DomUtil.create("div", "pontual-slider leaflet-control");
      div.innerHTML =
        "<div class='pontual-slider-title'>" +
        esc(spec.title) +
        "</div><button type='button' class='pontual-play' aria-label='Reproduzir'>▶</button>" +
        "<input type='range' class='pontual-range' aria-label='" +
        esc(spec.title) +
        "'><span class='pontual-time'></span>";
      L.DomEvent.disableClickPropagation(div);
      L.DomEvent.disableScrollPropagation(div);
      var range = div.querySelector("input");
      range.min = spec.min;
      range.max = spec.max;
      range.step = spec.step;
      range.value = spec.max;
      state.sliderLabel = div.querySelector(".pontual-time");
      state.range = range;
      range.addEventListener("input", function () {
        setTime(state, Number(range.value));
      });
      var button = div.querySelector("button");
      var timer = null;
      button.addEventListener("click", function () {
        if (timer) {
          clearInterval(timer);
          timer = null;
          button.textContent = "▶";
          return;
        }
        if (Number(range.value) >= spec.max) range.value = spec.min;
        button.textContent = "❚❚";
        var step = (spec.max - spec.min) / 200 || spec.step;
        timer = setInterval(function () {
          var next = Math.min(spec.max, Number(range.value) + step);
          range.value = next;
          setTime(state, next);
          if (next >= spec.max) {
            clearInterval(timer);
            timer = null;
            button.textContent = "▶";
          }
        }, 100);
      });
      return div;
    };
    return control;
  }

  /* Build every layer of ``spec`` on ``map`` (a Leaflet map). */
  P.render = function (map, spec) {
    P.t0 = performance.now();
    var renderer = L.canvas({ padding: 0.5, tolerance: 3 });
    var tz = spec.timezone || "America/Sao_Paulo";
    var state = { map: map, tz: tz, layers: {}, timed: [], order: [] };
    var overlays = {};
    if (spec.bounds) map.fitBounds(spec.bounds, { maxZoom: 16, animate: false, padding: [24, 24] });
    for (var k = 0; k < spec.layers.length; k++) {
      var layer = spec.layers[k];
      var built = buildLayer(map, renderer, layer, tz);
      state.layers[layer.id] = built;
      state.order.push(layer.id);
      overlays[esc(layer.label)] = built.group;
      if (layer.time) {
        prepareTime(built);
        state.timed.push(built);
      }
    }
    // Canvas order is the order of addition: lower ``z`` first (the control keeps spec order).
    var stack = spec.layers.slice().sort(function (a, b) {
      return (a.z || 0) - (b.z || 0);
    });
    for (var z = 0; z < stack.length; z++) {
      if (stack[z].show !== false) state.layers[stack[z].id].group.addTo(map);
    }
    var narrow = map.getContainer().clientWidth < NARROW_PX;
    if (spec.control !== false && spec.layers.length) {
      var layers = L.control.layers(null, overlays, { collapsed: narrow }).addTo(map);
      var toggle = layers.getContainer().querySelector(".leaflet-control-layers-toggle");
      if (toggle) {
        toggle.title = "Camadas";
        toggle.setAttribute("aria-label", "Camadas");
      }
    }
    if (spec.legend) {
      legendControl(spec.legend, narrow).addTo(map);
      syncLegend(state);
      map.on("overlayadd overlayremove", function () {
        syncLegend(state);
      });
    }
    if (spec.slider && state.timed.length) {
      sliderControl(state, spec.slider).addTo(map);
      setTime(state, spec.slider.max);
    }
    // Frame the data beside the controls (layer control, legend) rather than under them.
    if (spec.bounds) {
      var box = map.getContainer();
      var widest = function (selector) {
        var w = 0, found = box.querySelectorAll(selector + " .leaflet-control");
        for (var c = 0; c < found.length; c++) w = Math.max(w, found[c].offsetWidth);
        return w;
      };
      var right = widest(".leaflet-right"), left = widest(".leaflet-top.leaflet-left");
      if (right + left < box.clientWidth * 0.7)
        map.fitBounds(spec.bounds, {
          maxZoom: 16,
          animate: false,
          paddingTopLeft: [left + 10, 10],
          paddingBottomRight: [right + 10, 10],
        });
    }
    P.maps[spec.name || "map"] = state;
    P.t1 = performance.now();
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        P.ready = true;
        P.readyAt = performance.now();
      });
    });
    return state;
  };

  /* For tests and tools: rows drawn, and where row i of a layer is on the page. */
  P.count = function (layerId, name) {
    var built = P.maps[name || "map"].layers[layerId];
    return built.shown;
  };
  P.pagePoint = function (layerId, i, name) {
    var state = P.maps[name || "map"];
    var spec = state.layers[layerId].spec;
    var pt = state.map.latLngToContainerPoint([spec.lat[i], spec.lon[i]]);
    var box = state.map.getContainer().getBoundingClientRect();
    return { x: box.left + pt.x, y: box.top + pt.y };
  };
  P.setTime = function (t, name) {
    var state = P.maps[name || "map"];
    if (state.range) state.range.value = t;
    setTime(state, t);
  };
})();
