// The live part of /status is fetched again every second and swapped in.
// Nothing is fetched while the tab is hidden. Without JavaScript the page is
// the snapshot the server rendered.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var banner = document.getElementById("conn");
  if (!live) { return; }
  var url = live.getAttribute("data-src");
  var every = 1000;
  var timer = null;
  function schedule() {
    clearTimeout(timer);
    if (!document.hidden) { timer = setTimeout(poll, every); }
  }
  function poll() {
    fetch(url, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        banner.hidden = true;
        document.documentElement.setAttribute("data-live", "on");
      })
      .catch(function (e) {
        banner.textContent = "Lost contact with the service (" + e.message + "); retrying every second.";
        banner.hidden = false;
      })
      .then(schedule);
  }
  document.addEventListener("visibilitychange", schedule);
  document.documentElement.setAttribute("data-live", "on");
  schedule();
})();
