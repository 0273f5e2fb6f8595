// Keyboard-first rating: number keys / y / n answer the highlighted question, u marks it unsure, c opens its
// comment, arrows move between questions (up/down) and units (left/right), Enter goes on when every
// required answer is in. Every answer is saved at once (POST, JSON); nothing here names a model or judge.
// A key acts on the question and unit that had focus when it was pressed: focus moves as the key is handled,
// not when the save returns, saves of one question go out in order, and Enter waits for every pending save
// (keys pressed while the page is leaving are ignored rather than applied to the next unit).
(function () {
  "use strict";
  var opened = Date.now();
  var unit = document.getElementById("unit");
  if (!unit) {
    document.addEventListener("keydown", function (e) {
      var go = document.querySelector("[data-enter]");
      if (e.key === "Enter" && go) { window.location.href = go.getAttribute("data-enter"); }
    });
    document.body.setAttribute("data-ready", "yes");
    return;
  }
  var questions = Array.prototype.slice.call(document.querySelectorAll(".question"));
  var current = 0;
  var following = null;
  var pending = [];
  var chains = {};
  var leaving = false;

  function seconds() { return (Date.now() - opened) / 1000; }
  function focus(i) {
    current = Math.max(0, Math.min(questions.length - 1, i));
    questions.forEach(function (q, k) { q.classList.toggle("current", k === current); });
    if (questions[current]) { questions[current].scrollIntoView({ block: "nearest" }); }
  }
  function firstOpen() {
    for (var k = 0; k < questions.length; k++) {
      if (questions[k].getAttribute("data-answered") !== "yes") { return k; }
    }
    return questions.length - 1;
  }
  function allAnswered() {
    return questions.every(function (q) {
      return q.getAttribute("data-required") !== "yes" || q.getAttribute("data-answered") === "yes";
    });
  }
  function save(q, payload) {
    // The answer as it is now, sent after the question's earlier saves (so the last key wins on the server).
    var unsure = q.querySelector("input[type=checkbox]");
    var checked = q.querySelector("input[type=radio]:checked");
    var comment = q.querySelector("textarea");
    var body = {
      unit: unit.getAttribute("data-unit"),
      question: q.getAttribute("data-question"),
      value: checked ? checked.value : null,
      unsure: unsure ? unsure.checked : false,
      comment: comment ? comment.value : null,
      seconds: seconds()
    };
    Object.keys(payload || {}).forEach(function (k) { body[k] = payload[k]; });
    q.setAttribute("data-answered", body.value !== null || body.unsure ? "yes" : "no");
    var send = function () {
      return fetch(unit.getAttribute("data-answer"), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin"
      }).then(function (r) { return r.json(); });
    };
    var id = body.question;
    var sent = (chains[id] || Promise.resolve()).then(send, send).then(function (data) {
      if (data.error) { q.classList.add("error"); q.setAttribute("data-answered", "no"); return; }
      q.classList.remove("error");
      following = data.next;
      var progress = document.getElementById("progress");
      if (progress && data.total) { progress.textContent = progress.textContent.replace(/\d+(\D+)\d+/, data.done + "$1" + data.total); }
      document.body.setAttribute("data-saved", String(Number(document.body.getAttribute("data-saved") || 0) + 1));
    });
    chains[id] = sent;
    pending.push(sent);
    return sent;
  }
  function advance() { if (current < questions.length - 1) { focus(current + 1); } }
  function choose(key) {
    var q = questions[current];
    var input = q && q.querySelector('input[type=radio][data-key="' + key + '"]');
    if (!input) { return false; }
    input.checked = true;
    var unsure = q.querySelector("input[type=checkbox]");
    if (unsure) { unsure.checked = false; }
    save(q);
    advance();
    return true;
  }
  function go(which) {
    if (unit.getAttribute("data-has-" + which) !== "yes") { return false; }
    window.location.href = unit.getAttribute("data-" + which);
    return true;
  }

  questions.forEach(function (q, k) {
    q.addEventListener("change", function (e) {
      if (e.target.tagName === "INPUT") { focus(k); save(q); }
    });
    var comment = q.querySelector("textarea");
    if (comment) { comment.addEventListener("blur", function () { save(q); }); }
  });
  document.addEventListener("keydown", function (e) {
    if (e.target.tagName === "TEXTAREA") {
      if (e.key === "Escape" || (e.key === "Enter" && !e.shiftKey)) { e.preventDefault(); e.target.blur(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) { return; }
    if (leaving) { e.preventDefault(); return; }
    var key = e.key.toLowerCase();
    if (/^[1-9]$/.test(key) || key === "y" || key === "n") {
      if (choose(key)) { e.preventDefault(); }
    } else if (key === "u") {
      var q = questions[current];
      var box = q.querySelector("input[type=checkbox]");
      box.checked = true;
      q.querySelectorAll("input[type=radio]").forEach(function (r) { r.checked = false; });
      save(q);
      advance();
      e.preventDefault();
    } else if (key === "c") {
      var area = questions[current].querySelector("textarea");
      area.hidden = false;
      area.focus();
      e.preventDefault();
    } else if (e.key === "ArrowDown") { focus(current + 1); e.preventDefault(); }
    else if (e.key === "ArrowUp") { focus(current - 1); e.preventDefault(); }
    else if (e.key === "ArrowRight") { leave(function () { return go("next"); }); }
    else if (e.key === "ArrowLeft") { leave(function () { return go("previous"); }); }
    else if (e.key === "Enter") {
      if (allAnswered()) {
        leave(function () {
          window.location.href = following || (unit.getAttribute("data-has-next") === "yes" ? unit.getAttribute("data-next") : unit.getAttribute("data-done"));
        });
      } else { focus(firstOpen()); }
      e.preventDefault();
    }
  });
  function leave(then) {
    leaving = true;
    var stay = function () { leaving = false; };
    Promise.all(pending).then(function () { if (then() === false) { stay(); } }, stay);
  }
  focus(firstOpen());
  // Keys pressed before this point (the script is deferred) are not seen: a page is ready when this is set.
  document.body.setAttribute("data-ready", "yes");
})();
