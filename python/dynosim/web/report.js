// dynosim's HTML report: draws the plots of the document embedded in the page (the
// <script id="dynosim-data"> JSON, made by python/dynosim/html_report.py) with uPlot, inlined
// beside this file: line plots with 95% bands, zoom (drag; double-click resets) and the values
// under the cursor in the legend; log axes where the data span decades; heat maps of per-dyno
// queues over time. Nothing here reads the network.
(function () {
  "use strict";
  var data = document.getElementById("dynosim-data");
  var doc = data ? JSON.parse(data.textContent) : { plots: [] };
  var plots = [];

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function colour(i) { return css("--s" + (i % 8)); }
  function withAlpha(hex, alpha) {
    var m = /^#([0-9a-f]{6})$/i.exec(hex);
    if (!m) return hex;
    var n = parseInt(m[1], 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // A number for people: three significant digits, thousands separated.
  function num(v) {
    if (v === null || v === undefined || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 100) return Math.round(v).toLocaleString("en");
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    if (a >= 0.001) return v.toFixed(3);
    return v.toExponential(2);
  }

  // An axis of seconds from a run's start that spans more than two hours reads as a clock
  // (python/dynosim/time_axis.py, whose steps the spec carries as `clock`): ticks at the
  // smallest step that cuts the visible span into at most `most` intervals, labelled HH:MM
  // (":SS" when not a whole minute), "dN " past the first day, dN 24:00 for a day's end.
  function clockStep(span, clock) {
    for (var i = 0; i < clock.steps.length; i++) {
      if (span <= clock.steps[i] * clock.most) return clock.steps[i];
    }
    var last = clock.steps[clock.steps.length - 1];
    return last * Math.ceil(span / (last * clock.most));
  }
  function clockTicks(lo, hi, clock) {
    var s = clockStep(hi - lo, clock), out = [];
    for (var k = Math.ceil(lo / s - 1e-9); k <= Math.floor(hi / s + 1e-9); k++) out.push(k * s);
    return out;
  }
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function clockLabel(seconds) {
    var total = Math.round(seconds), sign = total < 0 ? "-" : "";
    total = Math.abs(total);
    var day = Math.floor(total / 86400), rest = total - day * 86400;
    if (rest === 0 && day > 0) { day -= 1; rest = 86400; }
    var h = Math.floor(rest / 3600), m = Math.floor((rest % 3600) / 60), sec = rest % 60;
    return sign + (day ? "d" + (day + 1) + " " : "") + two(h) + ":" + two(m) + (sec ? ":" + two(sec) : "");
  }
  // A time from a run's start as its axis shows it.
  function elapsed(v, clock) { return clock ? clockLabel(v) : num(v) + " s"; }

  function width(el) {
    return Math.max(280, Math.floor(el.getBoundingClientRect().width || 600));
  }

  function linePlot(spec, el) {
    var xs = spec.x.values;
    var data = [xs];
    var utc = function (v) { return new Date(v * 1e3).toISOString().replace("T", " ").slice(0, 19) + " UTC"; };
    var series = [{
      label: spec.x.label,
      value: function (u, v) {
        if (v === null || v === undefined) return "–";
        if (spec.x.time) return utc(v);
        if (spec.x.clock) return clockLabel(v);
        return spec.x.ticks ? (spec.x.ticks[v] !== undefined ? spec.x.ticks[v] : "") : num(v);
      }
    }];
    var bands = [];
    var hidden = [];
    spec.series.forEach(function (s, i) {
      var c = colour(i);
      data.push(s.y);
      var mine = data.length - 1;
      series.push({
        label: s.label, stroke: c, width: s.dash ? 1.5 : 2, spanGaps: !!spec.span_gaps, dash: s.dash ? [6, 4] : undefined,
        paths: s.points ? function () { return null; } : undefined,
        points: { show: s.points || (!s.dash && xs.length <= 40), size: s.points ? 7 : 5, fill: c },
        value: function (u, v) { return num(v); }
      });
      if (s.lo && s.hi) {
        data.push(s.hi);
        series.push({ label: s.label + " 95% high", stroke: "transparent", points: { show: false } });
        data.push(s.lo);
        series.push({ label: s.label + " 95% low", stroke: "transparent", points: { show: false } });
        bands.push({ series: [mine + 1, mine + 2], fill: withAlpha(c, 0.18) });
        hidden.push(mine + 1, mine + 2);
      }
    });
    var axisStroke = css("--muted"), grid = css("--grid");
    var opts = {
      width: width(el), height: spec.height || 300,
      series: series, bands: bands,
      cursor: { drag: { x: true, y: false }, points: { size: 6 } },
      // Times (seconds since 1970) are shown in UTC, as the logs give them.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      scales: {
        x: { time: !!spec.x.time, distr: spec.x.log ? 3 : 1 },
        y: { distr: spec.y.log ? 3 : 1, range: spec.y.log ? undefined : function (u, min, max) {
          return [Math.min(0, min), max > 0 ? max * 1.05 : 1];
        } }
      },
      axes: [
        { label: spec.x.label, stroke: axisStroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid },
          values: spec.x.time ? undefined : spec.x.clock ? function (u, vals) {
            return vals.map(clockLabel);
          } : spec.x.ticks ? function (u, vals) {
            return vals.map(function (v) { return Number.isInteger(v) && spec.x.ticks[v] !== undefined ? spec.x.ticks[v] : ""; });
          } : undefined,
          splits: spec.x.clock ? function (u, axis, min, max) { return clockTicks(min, max, spec.x.clock); }
            : spec.x.ticks ? function () { return xs.slice(); } : undefined },
        { label: spec.y.label, stroke: axisStroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid },
          size: 60, values: function (u, vals) { return vals.map(num); } }
      ],
      legend: { live: true }
    };
    var u = new uPlot(opts, data, el);
    // The bands' edges are not series of their own for a reader: out of the legend.
    var rows = u.root.querySelectorAll(".u-legend .u-series");
    hidden.forEach(function (i) { if (rows[i]) rows[i].style.display = "none"; });
    return u;
  }

  // The heat map's colours: from the background (an empty queue) through blue to red.
  var RAMP = [[0.93, 0.95, 0.98], [0.42, 0.68, 0.92], [0.16, 0.35, 0.75], [0.85, 0.33, 0.2], [0.6, 0.05, 0.05]];
  function rampAt(t) {
    var x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    var i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
    return RAMP[i].map(function (a, k) { return Math.round(255 * (a + (RAMP[i + 1][k] - a) * f)); });
  }

  function heatMap(spec, el) {
    var rows = spec.rows, cols = spec.times.length, n = rows.length;
    var max = 0;
    rows.forEach(function (r) { r.forEach(function (v) { if (v > max) max = v; }); });
    var canvas = document.createElement("canvas");
    canvas.width = cols; canvas.height = n;
    canvas.style.height = Math.max(120, Math.min(420, n * 4)) + "px";
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", spec.title);
    var ctx = canvas.getContext("2d");
    var img = ctx.createImageData(cols, n);
    // At least 4 on the scale: a dyno of one request is not drawn as a full one.
    var scale = Math.log(1 + Math.max(4, max));
    for (var d = 0; d < n; d++) {
      for (var t = 0; t < cols; t++) {
        var v = rows[d][t], rgb = v > 0 ? rampAt(0.15 + 0.85 * Math.log(1 + v) / scale) : null;
        var o = 4 * (d * cols + t);
        if (rgb) { img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255; }
        else { img.data[o + 3] = 0; }
      }
    }
    ctx.putImageData(img, 0, 0);
    var tip = document.createElement("div");
    tip.className = "tip";
    tip.textContent = "Point at a cell: " + spec.row_label + ", time, " + spec.value_label + ".";
    canvas.addEventListener("mousemove", function (e) {
      var box = canvas.getBoundingClientRect();
      var t = Math.floor((e.clientX - box.left) / box.width * cols);
      var d = Math.floor((e.clientY - box.top) / box.height * n);
      if (t < 0 || t >= cols || d < 0 || d >= n) return;
      tip.textContent = spec.row_names[d] + ", t = " + elapsed(spec.times[t], spec.clock) + ": " + spec.value_label + " " + rows[d][t];
    });
    var legend = document.createElement("div");
    legend.className = "scale";
    var bar = document.createElement("canvas");
    bar.width = 160; bar.height = 1;
    var bctx = bar.getContext("2d"), bimg = bctx.createImageData(160, 1);
    for (var i = 0; i < 160; i++) {
      var rgb = rampAt(0.15 + 0.85 * i / 159);
      bimg.data[4 * i] = rgb[0]; bimg.data[4 * i + 1] = rgb[1]; bimg.data[4 * i + 2] = rgb[2]; bimg.data[4 * i + 3] = 255;
    }
    bctx.putImageData(bimg, 0, 0);
    legend.appendChild(document.createTextNode("1"));
    legend.appendChild(bar);
    legend.appendChild(document.createTextNode(String(Math.max(4, max)) + " (log scale; empty: none; most: " + max + ")"));
    var axis = document.createElement("div");
    axis.className = "scale";
    axis.style.justifyContent = "space-between";
    [0, Math.floor((cols - 1) / 2), cols - 1].forEach(function (k) {
      var s = document.createElement("span");
      s.textContent = "t = " + elapsed(spec.times[k], spec.clock);
      axis.appendChild(s);
    });
    el.appendChild(canvas);
    el.appendChild(axis);
    el.appendChild(legend);
    el.appendChild(tip);
    return null;
  }

  function drawAll() {
    plots.forEach(function (u) { if (u) u.destroy(); });
    plots = [];
    (doc.plots || []).forEach(function (spec) {
      var el = document.getElementById(spec.id);
      if (!el) return;
      el.textContent = "";
      plots.push(spec.kind === "heatmap" ? heatMap(spec, el) : linePlot(spec, el));
    });
  }

  var button = document.getElementById("theme");
  if (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var dark = matchMedia("(prefers-color-scheme: dark)").matches;
      var now = document.documentElement.dataset.theme || (dark ? "dark" : "light");
      document.documentElement.dataset.theme = now === "dark" ? "light" : "dark";
      drawAll();
    });
  }
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      plots.forEach(function (u) {
        if (u) u.setSize({ width: width(u.root.parentNode), height: u.height });
      });
    }, 150);
  });
  window.addEventListener("beforeprint", function () {
    plots.forEach(function (u) { if (u) u.setSize({ width: 680, height: u.height }); });
  });
  // The playground draws each answer's plots with the same code.
  window.dynosimPlots = {
    draw: function (specs) { doc = { plots: specs }; drawAll(); },
    num: num,
    // The x axis's labels as drawn, one list per line plot (heat maps have no uPlot axis).
    xLabels: function () {
      var lines = plots.filter(function (u) { return u; });
      return lines.map(function (u) { return (u.axes[0]._values || []).slice(); });
    }
  };
  drawAll();
  document.documentElement.dataset.ready = "true";
})();
