// Mother's status page: fetch the live part every few seconds and swap it
// in. The server renders and escapes it (html/template); this script only
// moves it into place.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 2000;
  var live = document.getElementById("live");
  var conn = document.getElementById("conn");
  function show(ok, text) {
    conn.textContent = text;
    conn.className = ok ? "conn" : "conn lost";
  }
  function tick() {
    fetch("status/live", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        show(true, "live");
      })
      .catch(function (err) {
        show(false, "Mother is not answering (" + err.message + "); retrying");
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
