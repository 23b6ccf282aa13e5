// Re-fetches this page every data-refresh seconds and swaps each
// [data-live] element for its new version, so the scroll position and the
// filter being typed survive. On failure the last data stays, under a
// banner saying since when it is stale; the next tick tries again. An
// "onetick:refresh" event on the document refreshes at once (the job
// page's actions send it); <details> left open stay open.
(function () {
  "use strict";
  var every = Math.max(1, Number(document.body.getAttribute("data-refresh")) || 5) * 1000;
  var stale = document.getElementById("stale");
  var updated = new Date();
  var busy = false;
  var again = false;

  function fail(why) {
    stale.textContent = "Not updated since " + updated.toLocaleTimeString() + ": " + why + ". Retrying every " + every / 1000 + "s.";
    stale.hidden = false;
  }

  function refresh(now) {
    if (busy) {
      again = again || now === true;
      return;
    }
    if (document.hidden && now !== true) {
      return;
    }
    busy = true;
    fetch(location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        return r.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var parts = doc.querySelectorAll("[data-live]");
          if (parts.length === 0) {
            throw new Error("the replica answered " + r.status + " without the page");
          }
          parts.forEach(function (n) {
            var old = document.getElementById(n.id);
            if (old) {
              old.querySelectorAll("details[open][id]").forEach(function (d) {
                var same = n.querySelector('details[id="' + CSS.escape(d.id) + '"]');
                if (same) {
                  same.open = true;
                }
              });
              old.replaceWith(document.adoptNode(n));
            }
          });
          document.title = doc.title;
          updated = new Date();
          // A 503 is the page with the store's error in it: shown, not stale.
          stale.hidden = true;
        });
      })
      .catch(function (e) {
        fail(e && e.message ? e.message : "the replica did not answer");
      })
      .finally(function () {
        busy = false;
        if (again) {
          again = false;
          refresh(true);
        }
      });
  }

  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
  document.addEventListener("onetick:refresh", function () {
    refresh(true);
  });
})();
