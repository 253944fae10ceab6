// The playground's page: the scenario (a built-in, a file, or TOML typed in), controls for its
// main keys, and the results of each change (python/dynosim/serve.py runs them). The page's
// state (the scenario, the controls set, the policies) is in its URL, so that a link gives the
// same page. Plots are drawn by report.js, as in the HTML report.
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var client = Math.random().toString(36).slice(2) + Date.now().toString(36);
  var meta = null;            // /api/scenarios
  var state = { scenario: "rapgenius", toml: null, set: {}, policies: [] };
  var last = null;            // the last answer
  var inFlight = null;        // its AbortController
  var timer = null, ticking = null, polling = null, editTimer = null;

  // --- the URL holds the state -------------------------------------------------------------

  function encodeState() {
    var s = { s: state.scenario || undefined, t: state.scenario ? undefined : state.toml,
              k: Object.keys(state.set).length ? state.set : undefined,
              p: state.policies.length ? state.policies : undefined };
    var bytes = new TextEncoder().encode(JSON.stringify(s));
    var bin = "";
    bytes.forEach(function (b) { bin += String.fromCharCode(b); });
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function decodeState(text) {
    try {
      var bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
      var bytes = Uint8Array.from(bin, function (c) { return c.charCodeAt(0); });
      var s = JSON.parse(new TextDecoder().decode(bytes));
      return { scenario: s.s || "", toml: s.t || null, set: s.k || {}, policies: s.p || [] };
    } catch (e) {
      return null;
    }
  }

  function saveState() {
    history.replaceState(null, "", "#state=" + encodeState());
  }

  // --- controls ------------------------------------------------------------------------------

  function builtinToml(name) {
    var found = meta.scenarios.filter(function (s) { return s.name === name; })[0];
    return found ? found.toml : null;
  }

  function currentToml() {
    return state.scenario ? builtinToml(state.scenario) : (state.toml || "");
  }

  function control(c, values) {
    var wrap = document.createElement("label");
    wrap.textContent = c.label;
    var value = c.key in state.set ? state.set[c.key] : values[c.key];
    if (c.kind === "policies") {
      var box = document.createElement("div");
      box.className = "policies";
      var chosen = state.policies.length ? state.policies : String(values["router.policy"] || "").split(",");
      meta.policies.forEach(function (p) {
        var l = document.createElement("label");
        var input = document.createElement("input");
        input.type = "checkbox"; input.value = p; input.checked = chosen.indexOf(p) >= 0;
        input.dataset.policy = p;
        input.addEventListener("change", function () {
          var picked = Array.prototype.slice.call(box.querySelectorAll("input:checked")).map(function (i) { return i.value; });
          state.policies = picked;
          changed();
        });
        l.appendChild(input);
        l.appendChild(document.createTextNode(p));
        box.appendChild(l);
      });
      wrap.appendChild(box);
      return wrap;
    }
    var input;
    if (c.kind === "choice") {
      input = document.createElement("select");
      var options = c.key === "fleet.type" ? meta.dyno_types : meta.autoscalers;
      [""].concat(options).forEach(function (o) {
        var opt = document.createElement("option");
        opt.value = o; opt.textContent = o || "(as in the scenario)";
        input.appendChild(opt);
      });
    } else {
      input = document.createElement("input");
      input.type = c.kind === "number" ? "number" : "text";
      if (c.min !== undefined) input.min = c.min;
      if (c.hint) input.placeholder = c.hint;
    }
    input.dataset.key = c.key;
    input.value = value === undefined || value === null ? "" : String(value);
    input.addEventListener(c.kind === "text" ? "change" : "input", function () {
      if (input.value === "") delete state.set[c.key];
      else state.set[c.key] = c.kind === "number" ? Number(input.value) : input.value;
      changed();
    });
    wrap.appendChild(input);
    return wrap;
  }

  function renderControls(values) {
    var fields = $("fields");
    var focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.key : null;
    fields.textContent = "";
    meta.controls.forEach(function (c) { fields.appendChild(control(c, values || {})); });
    if (focused) {
      var again = fields.querySelector('[data-key="' + focused + '"]');
      if (again) again.focus();
    }
  }

  // --- runs ----------------------------------------------------------------------------------

  function changed(delay) {
    saveState();
    clearTimeout(timer);
    timer = setTimeout(run, delay === undefined ? 150 : delay);
  }

  function showError(message, line) {
    var box = $("error");
    box.hidden = false;
    box.textContent = (line ? "line " + line + ": " : "") + message;
    var editor = $("editor");
    editor.classList.toggle("bad", !!line);
    if (line) {
      $("editor-box").open = true;
      var lines = editor.value.split("\n");
      var start = 0;
      for (var i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
      editor.dataset.errorLine = String(line);
      if (document.activeElement !== editor) editor.setSelectionRange(start, start + (lines[line - 1] || "").length);
    } else {
      delete editor.dataset.errorLine;
    }
  }

  function clearError() {
    $("error").hidden = true;
    $("error").textContent = "";
    $("editor").classList.remove("bad");
    delete $("editor").dataset.errorLine;
  }

  function body() {
    return JSON.stringify({ toml: currentToml(), set: state.set, policies: state.policies });
  }

  function ordinal(n) {
    var tens = n % 100, ones = n % 10;
    var suffix = tens >= 11 && tens <= 13 ? "th" : ones === 1 ? "st" : ones === 2 ? "nd" : ones === 3 ? "rd" : "th";
    return n + suffix;
  }

  function run() {
    if (inFlight) inFlight.abort();
    var controller = new AbortController();
    inFlight = controller;
    var started = performance.now();
    clearInterval(ticking);
    clearInterval(polling);
    var place = null;  // the request's place in the server's queue while it waits
    var tick = function () {
      var seconds = ((performance.now() - started) / 1000).toFixed(1) + " s";
      $("state").textContent = place ? "waiting for the server: " + ordinal(place) + " in line… " + seconds
                                     : "running… " + seconds;
    };
    tick();
    ticking = setInterval(tick, 100);
    polling = setInterval(function () {
      fetch("/api/status", { headers: { "X-Dynosim-Client": client } })
        .then(function (r) { return r.json(); })
        .then(function (s) { if (controller === inFlight) place = s.position; })
        .catch(function () {});
    }, 500);
    fetch("/api/run", { method: "POST", body: body(), signal: controller.signal,
                        headers: { "Content-Type": "application/json", "X-Dynosim-Client": client } })
      .then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); })
      .then(function (answer) {
        if (controller !== inFlight) return;
        clearInterval(ticking);
        clearInterval(polling);
        inFlight = null;
        if (answer.status === 409) return;  // a newer run took its place
        if (answer.status !== 200) {
          $("state").textContent = "";
          showError(answer.body.error || "error", answer.body.line);
          return;
        }
        clearError();
        last = answer.body;
        $("state").textContent = "ran in " + last.seconds.toFixed(2) + " s";
        $("words").textContent = last.words;
        $("results").innerHTML = last.html;
        window.dynosimPlots.draw(last.plots);
        if (!state.scenario || document.activeElement !== $("editor")) {
          if (document.activeElement !== $("editor")) $("editor").value = state.scenario ? builtinToml(state.scenario) : state.toml;
        }
        renderControls(last.values);
        document.documentElement.dataset.runs = String(Number(document.documentElement.dataset.runs || 0) + 1);
      })
      .catch(function (e) {
        if (e.name === "AbortError") return;
        clearInterval(ticking);
        clearInterval(polling);
        $("state").textContent = "";
        showError("the server did not answer: " + e.message);
      });
  }

  function download(name, blob) {
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  // --- start ---------------------------------------------------------------------------------

  function start() {
    var select = $("builtin");
    meta.scenarios.forEach(function (s) {
      var opt = document.createElement("option");
      opt.value = s.name; opt.textContent = s.name;
      opt.title = s.description;
      select.appendChild(opt);
    });
    var hash = location.hash.match(/^#state=(.+)$/);
    var fromUrl = hash ? decodeState(hash[1]) : null;
    if (fromUrl) state = fromUrl;
    else if (meta.initial && meta.initial.toml) state = { scenario: "", toml: meta.initial.toml, set: {}, policies: [] };
    else if (meta.initial && meta.initial.name) state.scenario = meta.initial.name;
    if (state.scenario && !builtinToml(state.scenario)) state.scenario = "rapgenius";
    select.value = state.scenario || "";
    $("editor").value = currentToml();
    select.addEventListener("change", function () {
      state = { scenario: select.value, toml: select.value ? null : $("editor").value, set: {}, policies: [] };
      $("editor").value = currentToml();
      changed(0);
    });
    $("editor").addEventListener("input", function () {
      clearTimeout(editTimer);
      editTimer = setTimeout(function () {
        state.toml = $("editor").value;
        state.scenario = "";
        select.value = "";
        changed(0);
      }, 400);
    });
    var open = function (file) {
      if (!file) return;
      if (file.size > meta.max_body) { showError(file.name + " is larger than " + (meta.max_body >> 10) + " KiB"); return; }
      file.text().then(function (text) {
        state = { scenario: "", toml: text, set: {}, policies: [] };
        select.value = "";
        $("editor").value = text;
        changed(0);
      });
    };
    $("upload").addEventListener("change", function () { open($("upload").files[0]); });
    // A TOML file dropped anywhere on the page opens as the scenario.
    document.addEventListener("dragover", function (e) { e.preventDefault(); });
    document.addEventListener("drop", function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) open(e.dataTransfer.files[0]);
    });
    $("download-toml").addEventListener("click", function () {
      var text = last ? last.toml : currentToml();
      download("scenario.toml", new Blob([text], { type: "text/plain" }));
    });
    $("download-report").addEventListener("click", function () {
      fetch("/api/report", { method: "POST", body: body(),
                             headers: { "Content-Type": "application/json", "X-Dynosim-Client": client + "-report" } })
        .then(function (r) {
          if (!r.ok) return r.json().then(function (j) { showError(j.error, j.line); });
          return r.blob().then(function (b) { download("report.html", b); });
        });
    });
    renderControls({});
    changed(0);
  }

  fetch("/api/scenarios").then(function (r) { return r.json(); }).then(function (m) { meta = m; start(); });
})();
