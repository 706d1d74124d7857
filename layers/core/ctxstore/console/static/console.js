/* ctxstore console behaviour: copy buttons, confirmations, uploads with progress, graphs.
   No inline scripts anywhere (the Content-Security-Policy allows only this origin's files). */
(function () {
  "use strict";

  var TERMINAL = { completed: true, errored: true };
  var STAGE = { queued: 55, processing: 70, graph_creation: 85, completed: 100, errored: 100 };

  function $all(root, sel) { return Array.prototype.slice.call(root.querySelectorAll(sel)); }
  function csrf() {
    var raw = document.body.getAttribute("hx-headers");
    try { return raw ? JSON.parse(raw)["X-CSRF-Token"] : ""; } catch (e) { return ""; }
  }

  // ---- copy buttons -----------------------------------------------------------------------
  function initCopy(root) {
    $all(root, "[data-copy]").forEach(function (btn) {
      if (btn.dataset.bound) return;
      btn.dataset.bound = "1";
      btn.addEventListener("click", function () {
        var el = document.querySelector(btn.dataset.copy);
        if (!el) return;
        var text = "value" in el && el.tagName !== "PRE" ? el.value : el.textContent;
        var done = function () { var t = btn.textContent; btn.textContent = "Copied"; setTimeout(function () { btn.textContent = t; }, 1500); };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(el); done(); });
        } else { fallbackCopy(el); done(); }
      });
    });
  }
  function fallbackCopy(el) {
    var range = document.createRange();
    if (el.select) { el.select(); } else { range.selectNodeContents(el); var s = window.getSelection(); s.removeAllRanges(); s.addRange(range); }
    try { document.execCommand("copy"); } catch (e) { /* the text stays selected for a manual copy */ }
  }

  // ---- confirmations ------------------------------------------------------------------------
  function confirmDialog(message, label, onYes) {
    var d = document.createElement("dialog");
    d.className = "confirm";
    d.setAttribute("aria-labelledby", "confirm-text");
    var p = document.createElement("p"); p.id = "confirm-text"; p.textContent = message;
    var buttons = document.createElement("div"); buttons.className = "buttons";
    var no = document.createElement("button"); no.type = "button"; no.textContent = "Cancel";
    var yes = document.createElement("button"); yes.type = "button"; yes.className = "danger"; yes.textContent = label || "Confirm";
    buttons.appendChild(no); buttons.appendChild(yes); d.appendChild(p); d.appendChild(buttons);
    document.body.appendChild(d);
    no.addEventListener("click", function () { d.close(); });
    yes.addEventListener("click", function () { d.close(); onYes(); });
    d.addEventListener("close", function () { d.remove(); });
    d.showModal();
    no.focus();
  }
  function initConfirm(root) {
    $all(root, "form[data-confirm]").forEach(function (form) {
      if (form.dataset.bound) return;
      form.dataset.bound = "1";
      form.addEventListener("submit", function (ev) {
        if (form.dataset.confirmed) return;
        ev.preventDefault();
        confirmDialog(form.dataset.confirm, form.dataset.confirmLabel, function () {
          // A polled partial may have replaced the form meanwhile: submit the one on the page now.
          var target = form.isConnected ? form : (form.id && document.getElementById(form.id)) || form;
          target.dataset.confirmed = "1";
          target.submit();
        });
      });
    });
    $all(root, "form.typed-confirm").forEach(function (form) {
      if (form.dataset.bound) return;
      form.dataset.bound = "1";
      var input = form.querySelector("input[name=confirm]");
      var button = form.querySelector("button[type=submit]");
      input.addEventListener("input", function () { button.disabled = input.value !== form.dataset.expect; });
    });
    $all(root, "[data-toggle-on],[data-toggle-off]").forEach(function (radio) {
      if (radio.dataset.bound) return;
      radio.dataset.bound = "1";
      radio.addEventListener("change", function () {
        var on = radio.dataset.toggleOn, off = radio.dataset.toggleOff;
        if (on) document.querySelector(on).hidden = false;
        if (off) document.querySelector(off).hidden = true;
      });
    });
    $all(root, "textarea[data-submit-on-ctrl-enter]").forEach(function (ta) {
      if (ta.dataset.bound) return;
      ta.dataset.bound = "1";
      ta.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); ta.form.requestSubmit(); }
      });
    });
  }

  // ---- uploads: one request per file, a progress bar each, then status until completed ------
  function initDropzone(root) {
    $all(root, "[data-dropzone]").forEach(function (zone) {
      if (zone.dataset.bound) return;
      zone.dataset.bound = "1";
      var list = zone.parentNode.querySelector("[data-upload-list]");
      var input = zone.querySelector("[data-file-input]");
      var send = function (files) { Array.prototype.forEach.call(files, function (f) { uploadOne(zone, list, f); }); };
      zone.addEventListener("dragover", function (ev) { ev.preventDefault(); zone.classList.add("over"); });
      zone.addEventListener("dragleave", function () { zone.classList.remove("over"); });
      zone.addEventListener("drop", function (ev) { ev.preventDefault(); zone.classList.remove("over"); send(ev.dataTransfer.files); });
      input.addEventListener("change", function () { send(input.files); input.value = ""; });
    });
  }
  function uploadRow(list, name) {
    var li = document.createElement("li");
    var n = document.createElement("span"); n.className = "name"; n.textContent = name;
    var bar = document.createElement("progress"); bar.max = 100; bar.value = 0; bar.setAttribute("aria-label", "Progress of " + name);
    var st = document.createElement("span"); st.className = "status status-queued"; st.textContent = "uploading";
    li.appendChild(n); li.appendChild(bar); li.appendChild(st); list.appendChild(li);
    return { li: li, bar: bar, st: st };
  }
  function setStatus(row, status, detail) {
    row.st.className = "status status-" + status;
    row.st.textContent = status + (detail ? " — " + detail : "");
    row.li.dataset.status = status;
    if (STAGE[status] !== undefined) row.bar.value = STAGE[status];
  }
  function uploadOne(zone, list, file) {
    var row = uploadRow(list, file.name);
    if (file.size > Number(zone.dataset.maxBytes)) { setStatus(row, "errored", "over the size limit"); return; }
    if (file.size > Number(zone.dataset.inlineMaxBytes)) { uploadByReference(zone, row, file); return; }
    var body = new FormData();
    body.append("file", file, file.name);
    body.append("collection", zone.dataset.collection || "");
    send(row, zone.dataset.uploadUrl, body, true, function (status, answer) { accepted(zone, row, status, answer); });
  }
  // One POST with a progress bar (the first half of the bar); done(status, parsed JSON answer or {}).
  function send(row, url, body, withCsrf, done) {
    var xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    if (withCsrf) xhr.setRequestHeader("X-CSRF-Token", csrf());
    xhr.upload.addEventListener("progress", function (ev) { if (ev.lengthComputable) row.bar.value = Math.round((ev.loaded / ev.total) * 50); });
    xhr.addEventListener("load", function () {
      var answer = {};
      try { answer = JSON.parse(xhr.responseText); } catch (e) { /* S3 and /blobs answer without JSON */ }
      done(xhr.status, answer);
    });
    xhr.addEventListener("error", function () { setStatus(row, "errored", "the connection failed"); });
    xhr.send(body);
  }
  function postJson(row, url, payload, done) {
    fetch(url, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf() }, body: JSON.stringify(payload) })
      .then(function (r) { return r.json().then(function (j) { done(r.status, j); }, function () { done(r.status, {}); }); })
      .catch(function () { setStatus(row, "errored", "the connection failed"); });
  }
  function failed(row, answer, fallback) {
    var err = answer.error || {};
    setStatus(row, "errored", (err.message || fallback) + (answer.request_id ? " (request id " + answer.request_id + ")" : ""));
  }
  // Past the request size the console's host takes (Lambda: 6 MB), a file goes to blob storage under an
  // upload grant (S3's presigned POST on AWS), then is ingested by reference: POST /context/uploads' path.
  function uploadByReference(zone, row, file) {
    var ask = { filename: file.name, size_bytes: file.size };
    if (file.type) ask.content_type = file.type;
    postJson(row, zone.dataset.grantUrl, ask, function (status, grant) {
      if (status >= 400 || !grant.upload_id) { failed(row, grant, "no upload grant"); return; }
      var body = new FormData();
      Object.keys(grant.fields || {}).forEach(function (k) { body.append(k, grant.fields[k]); });
      body.append(grant.file_field || "file", file, file.name);  // last: S3 ignores fields after the file
      send(row, grant.url, body, false, function (stored) {
        if (stored >= 300) { setStatus(row, "errored", "the storage service refused the file (HTTP " + stored + ")"); return; }
        row.li.dataset.byReference = "1";
        var ref = { upload_id: grant.upload_id, filename: file.name, collection: zone.dataset.collection || "" };
        postJson(row, zone.dataset.refUrl, ref, function (s, answer) { accepted(zone, row, s, answer); });
      });
    });
  }
  function accepted(zone, row, status, answer) {
    if (status >= 400 || !answer.id) { failed(row, answer, "upload failed"); return; }
    if (answer.status === "failed") { setStatus(row, "errored", (answer.error_code || "") + " " + (answer.error || "rejected")); return; }
    row.li.dataset.itemId = answer.id;
    setStatus(row, "queued");
    refreshRows();
    poll(zone, row, answer.id);
  }
  function refreshRows() {
    // The list below shows the new item and follows its status (htmx polls while anything is in flight).
    var rows = document.getElementById("item-rows");
    if (rows && window.htmx) window.htmx.ajax("GET", rows.dataset.rowsUrl, { target: "#item-rows", swap: "outerHTML" });
  }
  function poll(zone, row, id) {
    var url = zone.dataset.statusUrl + "?collection=" + encodeURIComponent(zone.dataset.collection || "") + "&ids=" + encodeURIComponent(id);
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        var s = (data.statuses || [])[0] || {};
        var status = s.indexing_status || "queued";
        setStatus(row, status, status === "errored" ? (s.error_code + " " + (s.error_message || "")) : "");
        if (!TERMINAL[status]) setTimeout(function () { poll(zone, row, id); }, 1000);
        else refreshRows();
      })
      .catch(function () { setTimeout(function () { poll(zone, row, id); }, 2000); });
  }

  // ---- graphs -------------------------------------------------------------------------------
  var PALETTE = ["#3949ab", "#00897b", "#f4511e", "#8e24aa", "#6d4c41", "#c0ca33", "#1e88e5", "#d81b60"];
  function colour(kind) {
    var h = 0; for (var i = 0; i < kind.length; i++) h = (h * 31 + kind.charCodeAt(i)) >>> 0;
    return kind === "seed" ? "#f4511e" : PALETTE[h % PALETTE.length];
  }
  function drawGraph(el, elements) {
    var summary = document.querySelector("[data-graph-summary]");
    var list = el.parentNode.querySelector("[data-graph-list]");
    el.dataset.nodes = String(elements.filter(function (e) { return !e.data.source; }).length);
    if (!elements.length) {
      el.innerHTML = '<div class="empty-state"><p><strong>No relations to show yet.</strong></p><p class="muted">Relations appear once items finish indexing (status completed). Try another collection, store or item.</p></div>';
      el.dataset.graphReady = "0";
      return;
    }
    if (typeof window.cytoscape !== "function") { el.textContent = "The graph library did not load."; return; }
    elements.forEach(function (e) { if (!e.data.source) e.data.colour = colour(e.data.kind || "entity"); });
    var cy = window.cytoscape({
      container: el,
      elements: elements,
      wheelSensitivity: 0.3,
      minZoom: 0.1,
      maxZoom: 2.5,
      style: [
        { selector: "node", style: { "background-color": "data(colour)", label: "data(label)", "font-size": 11, color: "#1b1f24", "text-valign": "bottom", "text-margin-y": 4, width: 18, height: 18, "text-wrap": "ellipsis", "text-max-width": 140 } },
        { selector: "edge", style: { width: 1.5, "line-color": "#9fa8da", "target-arrow-color": "#9fa8da", "target-arrow-shape": "triangle", "curve-style": "bezier", label: "data(label)", "font-size": 9, color: "#5b6470", "text-rotation": "autorotate", "text-background-color": "#fbfcfe", "text-background-opacity": 1 } },
        { selector: ":selected", style: { "border-width": 3, "border-color": "#1b1f24", "line-color": "#3949ab" } }
      ],
      layout: { name: elements.length > 400 ? "grid" : "cose", animate: false, nodeDimensionsIncludeLabels: true }
    });
    var itemHref = el.dataset.itemHref;
    var open = function (item) { if (item && itemHref) window.location.href = itemHref + encodeURIComponent(item); };
    cy.on("tap", "node, edge", function (ev) { open(ev.target.data("item")); });
    var fit = el.parentNode.querySelector("[data-graph-fit]");
    if (fit) fit.addEventListener("click", function () { cy.fit(undefined, 20); });
    if (list) {
      list.innerHTML = "";
      cy.edges().forEach(function (e) {
        var li = document.createElement("li");
        var text = e.source().data("label") + " — " + (e.data("label") || "related") + " → " + e.target().data("label");
        if (e.data("item") && itemHref) { var a = document.createElement("a"); a.href = itemHref + encodeURIComponent(e.data("item")); a.textContent = text; li.appendChild(a); }
        else li.textContent = text;
        if (e.data("context")) { var c = document.createElement("div"); c.className = "muted small"; c.textContent = e.data("context"); li.appendChild(c); }
        list.appendChild(li);
      });
    }
    el.dataset.graphReady = String(cy.nodes().length);
    el.ctxGraph = cy;
  }
  function initGraphs(root) {
    $all(root, "[data-graph]").forEach(function (el) {
      if (el.dataset.bound) return;
      el.dataset.bound = "1";
      if (el.dataset.elements) { drawGraph(el, JSON.parse(el.dataset.elements)); return; }
      var summary = document.querySelector("[data-graph-summary]");
      fetch(el.dataset.graphSrc, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
        .then(function (res) {
          if (!res.ok) {
            var err = res.body.error || {};
            if (summary) { summary.className = "alert"; summary.textContent = (err.headline || "") + " " + (err.message || "") + " (request id " + res.body.request_id + ")"; }
            el.dataset.graphReady = "0";
            return;
          }
          if (summary) summary.textContent = res.body.summary + (res.body.truncated ? " (truncated)" : "");
          drawGraph(el, res.body.elements);
        });
    });
  }

  function init(root) { initCopy(root); initConfirm(root); initDropzone(root); initGraphs(root); }
  document.addEventListener("DOMContentLoaded", function () {
    init(document);
    // htmx swaps in partials (results, polled rows): bind what they contain too.
    document.body.addEventListener("htmx:load", function (ev) { init(ev.detail.elt); });
  });
})();
