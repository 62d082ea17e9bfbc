// The live part of /status is fetched again every data-every milliseconds
// after the previous poll ended, and swapped in. A poll not answered within
// data-timeout milliseconds is given up (a frozen service holds the request
// open forever) and shows "Lost contact". Nothing is fetched while the tab is
// hidden. Without JavaScript the page is the snapshot the server rendered.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var banner = document.getElementById("conn");
  if (!live) { return; }
  var url = live.getAttribute("data-src");
  var every = Number(live.getAttribute("data-every")) || 1000;
  var timeout = Number(live.getAttribute("data-timeout")) || 3000;
  var timer = null;
  function schedule() {
    clearTimeout(timer);
    if (!document.hidden) { timer = setTimeout(poll, every); }
  }
  // lost shows the banner; data-lost-at keeps when contact was first lost.
  function lost(why) {
    if (banner.hidden) { banner.setAttribute("data-lost-at", String(Date.now())); }
    var at = new Date(Number(banner.getAttribute("data-lost-at"))).toISOString().substring(11, 19);
    banner.textContent = "Lost contact with the service at " + at + " UTC (" + why + "); retrying every " + (every / 1000) + " s.";
    banner.hidden = false;
    document.documentElement.setAttribute("data-contact", "lost");
  }
  function poll() {
    var ctl = new AbortController();
    var cut = setTimeout(function () { ctl.abort(); }, timeout);
    fetch(url, { cache: "no-store", headers: { "Accept": "text/html" }, signal: ctl.signal })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        banner.hidden = true;
        document.documentElement.setAttribute("data-contact", "on");
      })
      .catch(function (e) {
        lost(ctl.signal.aborted ? "no answer within " + (timeout / 1000) + " s" : e.message);
      })
      .then(function () { clearTimeout(cut); schedule(); });
  }
  document.addEventListener("visibilitychange", schedule);
  document.documentElement.setAttribute("data-live", "on");
  schedule();
})();
