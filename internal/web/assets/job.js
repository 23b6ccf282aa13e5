// The job page's actions: each is a fetch() to this replica's API with the
// token as an Authorization header. The token is typed into a password
// field that belongs to no form (so no submit can put it in a URL) and kept
// in sessionStorage: this tab only, gone when it closes.
(function () {
  "use strict";
  var KEY = "onetick-token";
  var token = document.getElementById("token");
  if (!token) {
    return; // changes are disabled: no actions on the page
  }
  var job = document.body.getAttribute("data-job");
  var jobAPI = "../api/v1/jobs/" + encodeURIComponent(job) + "/";
  var out = document.getElementById("action-result");
  var reason = document.getElementById("reason");
  var from = document.getElementById("bf-from");
  var to = document.getElementById("bf-to");
  var plan = document.getElementById("bf-plan");
  var planned = null; // the range the shown dry run listed

  try {
    token.value = sessionStorage.getItem(KEY) || "";
  } catch (e) {
    // Storage refused (a private mode): the token lives in the field only.
  }
  token.addEventListener("input", function () {
    try {
      if (token.value) {
        sessionStorage.setItem(KEY, token.value);
      } else {
        sessionStorage.removeItem(KEY);
      }
    } catch (e) {}
  });
  document.getElementById("forget").addEventListener("click", function () {
    token.value = "";
    try {
      sessionStorage.removeItem(KEY);
    } catch (e) {}
    say("ok", "The token is forgotten.");
  });

  function say(kind, text) {
    out.textContent = text;
    out.className = "result " + kind;
    out.hidden = false;
  }

  // post sends body as JSON to path and resolves with the answer's JSON,
  // or rejects with the API's error message.
  function post(path, body) {
    var t = token.value.trim();
    if (!t) {
      return Promise.reject(new Error("Enter the API token (http.token) first."));
    }
    return fetch(path, {
      method: "POST",
      headers: { "Authorization": "Bearer " + t, "Content-Type": "application/json" },
      body: JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer"
    }).then(function (r) {
      return r.json().catch(function () {
        return {};
      }).then(function (j) {
        if (!r.ok) {
          throw new Error((j && j.error) || "the replica answered " + r.status);
        }
        return j;
      });
    });
  }

  // act runs one action from button: the answer is described by done.
  function act(button, path, body, done) {
    button.disabled = true;
    say("busy", button.textContent + "…");
    return post(path, body)
      .then(function (j) {
        say("ok", done(j));
        document.dispatchEvent(new Event("onetick:refresh"));
        return j;
      })
      .catch(function (e) {
        say("bad", e.message);
      })
      .finally(function () {
        button.disabled = false;
      });
  }

  var who = "job page";

  document.getElementById("pause").addEventListener("click", function () {
    if (!reason.value.trim()) {
      say("bad", "A pause needs a reason: it is recorded with it.");
      reason.focus();
      return;
    }
    act(this, jobAPI + "pause", { reason: reason.value, who: who }, function () {
      return "Paused " + job + ".";
    });
  });
  document.getElementById("resume").addEventListener("click", function () {
    act(this, jobAPI + "resume", { reason: reason.value, who: who }, function () {
      return "Resumed " + job + ": it fires from its next slot.";
    });
  });
  document.getElementById("trigger").addEventListener("click", function () {
    act(this, jobAPI + "trigger", { who: who }, function (j) {
      return (j.enqueued ? "Triggered: tick " : "Already enqueued: tick ") + j.tick + ".";
    });
  });

  // Backfill: a dry run lists the slots; Enqueue sends the same range.
  function utcInput(d) {
    return d.toISOString().slice(0, 19);
  }
  function rfc3339(v) {
    if (!v) {
      return "";
    }
    return (v.length === 16 ? v + ":00" : v) + "Z";
  }
  var now = Date.now();
  from.value = utcInput(new Date(Math.floor((now - 3600e3) / 60e3) * 60e3));
  to.value = utcInput(new Date(Math.floor((now - 60e3) / 60e3) * 60e3));
  function drop() {
    planned = null;
    plan.hidden = true;
  }
  from.addEventListener("input", drop);
  to.addEventListener("input", drop);
  document.getElementById("bf-cancel").addEventListener("click", drop);
  document.getElementById("bf-list").addEventListener("click", function () {
    var range = { from: rfc3339(from.value), to: rfc3339(to.value) };
    drop();
    act(this, jobAPI + "backfill", { from: range.from, to: range.to, dry_run: true, who: who }, function (j) {
      var list = document.getElementById("bf-slots");
      list.textContent = "";
      var n = 0;
      j.slots.forEach(function (s, i) {
        var li = document.createElement("li");
        li.textContent = new Date(s).toISOString();
        if (j.outcomes[i] === "would_enqueue") {
          n++;
        } else {
          li.className = "done";
          li.title = "already enqueued or run (the run ledger records it): not enqueued again";
        }
        list.appendChild(li);
      });
      var had = j.slots.length - n;
      document.getElementById("bf-summary").textContent = j.slots.length === 0 ?
        "No slot of " + job + " in this range." :
        n + " slot" + (n === 1 ? "" : "s") + " of " + job + " would be enqueued" +
        (had ? "; " + had + " already enqueued or run, not enqueued again (struck out)" : " (a slot already enqueued is not enqueued again)") + ":";
      var confirm = document.getElementById("bf-confirm");
      confirm.hidden = n === 0;
      confirm.textContent = "Enqueue " + n + " slot" + (n === 1 ? "" : "s");
      planned = n === 0 ? null : range;
      plan.hidden = false;
      return "Dry run: " + n + " slot" + (n === 1 ? "" : "s") + ". Nothing was enqueued yet.";
    });
  });
  document.getElementById("bf-confirm").addEventListener("click", function () {
    if (!planned) {
      return;
    }
    var range = planned;
    act(this, jobAPI + "backfill", { from: range.from, to: range.to, who: who }, function (j) {
      drop();
      return "Backfilled: " + j.enqueued + " enqueued" + (j.duplicates ? ", " + j.duplicates + " already enqueued" : "") +
        (j.other ? ", " + j.other + " refused" : "") + ".";
    });
  });

  // Replay buttons come and go with the refresh: one listener for all.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("button[data-replay]");
    if (!b) {
      return;
    }
    act(b, "../api/v1/dead/" + encodeURIComponent(b.getAttribute("data-replay")) + "/replay", { who: who }, function (j) {
      return "Replayed: tick " + j.tick + " is back in its stream as attempt 1.";
    });
  });
})();
