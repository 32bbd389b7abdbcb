// Live updates: the server pushes the page's live parts, rendered (and escaped) on the
// server, as `fragments` events; nothing here builds HTML from data.
(function () {
  "use strict";
  window.mpDashboard = { loadedAt: Date.now(), updates: 0 };
  var root = document.querySelector("[data-live]");
  var badge = document.getElementById("live");
  if (!root || !window.EventSource) { return; }
  var source = new EventSource(root.getAttribute("data-live"));
  source.addEventListener("open", function () { badge.textContent = "● live"; badge.className = "live on"; });
  source.addEventListener("error", function () { badge.textContent = "○ reconnecting"; badge.className = "live"; });
  source.addEventListener("fragments", function (ev) {
    var parts = JSON.parse(ev.data);
    Object.keys(parts).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.innerHTML = parts[id]; }
    });
    window.mpDashboard.updates += 1;
    document.body.setAttribute("data-updates", String(window.mpDashboard.updates));
  });
})();
