// Fuzzball Web UI: the workflow editor. The server checks the text as it is typed (a
// debounced POST to /editor/check) and the problems it finds are listed and marked at their
// lines; v1 files that are opened, pasted or converted go through /editor/upgrade. Start
// posts the form: the text exactly as it stands. Loaded from this origin (no inline script).
"use strict";
(function () {
  var DEBOUNCE_MS = 400;

  function Editor(form) {
    this.form = form;
    this.text = document.getElementById("specification");
    this.gutter = document.getElementById("gutter");
    this.list = document.getElementById("problems");
    this.state = document.getElementById("check-state");
    this.upgradeButton = document.getElementById("upgrade");
    this.csrf = form.elements.csrf.value;
    this.timer = null;
    this.sent = 0; // each check is numbered; an answer to an older one is dropped
    this.lines = 0;
    this.problems = [];
    var self = this;
    this.text.addEventListener("input", function () {
      self.drawGutter();
      self.schedule();
    });
    this.text.addEventListener("scroll", function () {
      self.gutter.scrollTop = self.text.scrollTop;
    });
    this.text.addEventListener("paste", function (event) {
      var pasted = (event.clipboardData || window.clipboardData).getData("text");
      // a whole file pasted in is converted like an opened one
      window.setTimeout(function () {
        if (pasted.length * 5 >= self.text.value.length * 4) { self.checkNow(true); }
      }, 0);
    });
    document.getElementById("upload").addEventListener("change", function (event) {
      var file = event.target.files[0];
      if (!file) { return; }
      file.text().then(function (content) {
        self.text.value = content;
        self.drawGutter();
        self.checkNow(true);
      });
    });
    this.upgradeButton.addEventListener("click", function () { self.upgrade(); });
    // no Start button (the visitor may not start workflows): Enter in the name field must
    // not send the form, which the server would refuse
    form.addEventListener("submit", function (event) {
      if (!document.getElementById("start")) { event.preventDefault(); }
    });
    this.list.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-line]");
      if (button && button.getAttribute("data-line")) {
        self.goToLine(Number(button.getAttribute("data-line")));
      }
    });
    this.drawGutter();
    this.checkNow(false);
  }

  Editor.prototype.post = function (url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": this.csrf },
      body: JSON.stringify(body),
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (response.redirected || type.indexOf("application/json") !== 0) {
        window.location.assign(response.url); // the session ended: to the sign-in page
        return null;
      }
      return response.json().then(function (data) { return { ok: response.ok, data: data }; });
    });
  };

  Editor.prototype.schedule = function () {
    var self = this;
    window.clearTimeout(this.timer);
    this.state.textContent = "Checking…";
    this.timer = window.setTimeout(function () { self.checkNow(false); }, DEBOUNCE_MS);
  };

  // check the text now; ``convert``: a v1 file is converted to v4 by the server at once
  Editor.prototype.checkNow = function (convert) {
    var self = this;
    window.clearTimeout(this.timer);
    var number = ++this.sent;
    this.post(this.form.getAttribute("data-check-url"), { specification: this.text.value })
      .then(function (answer) {
        if (answer === null || number !== self.sent) { return; }
        if (!answer.ok) {
          self.show([{ severity: "error", field: "", message: answer.data.message, line: null }]);
          return;
        }
        self.upgradeButton.hidden = !answer.data.upgradable;
        if (convert && answer.data.upgradable) {
          self.upgrade();
          return;
        }
        self.show(answer.data.problems);
      })
      .catch(function () {
        if (number === self.sent) { self.state.textContent = "The server could not be reached"; }
      });
  };

  Editor.prototype.upgrade = function () {
    var self = this;
    var number = ++this.sent;
    this.state.textContent = "Converting to v4…";
    this.post(this.form.getAttribute("data-upgrade-url"), { specification: this.text.value })
      .then(function (answer) {
        if (answer === null || number !== self.sent) { return; }
        if (!answer.ok) {
          self.show(answer.data.problems || [
            { severity: "error", field: "", message: answer.data.message, line: null },
          ]);
          return;
        }
        self.text.value = answer.data.specification;
        self.drawGutter();
        self.checkNow(false);
      });
  };

  Editor.prototype.show = function (problems) {
    this.problems = problems;
    while (this.list.firstChild) { this.list.removeChild(this.list.firstChild); }
    var errors = 0;
    problems.forEach(function (problem) {
      if (problem.severity === "error") { errors += 1; }
      var item = document.createElement("li");
      item.className = "problem-" + problem.severity;
      var button = document.createElement("button");
      button.type = "button";
      button.setAttribute("data-line", problem.line || "");
      button.textContent = (problem.line ? "Line " + problem.line + ": " : "") +
        (problem.field ? problem.field + ": " : "") + problem.message;
      item.appendChild(button);
      this.list.appendChild(item);
    }, this);
    var warnings = problems.length - errors;
    if (!problems.length) {
      this.state.textContent = "Valid";
      this.state.className = "ok";
    } else {
      this.state.className = errors ? "error" : "";
      this.state.textContent = errors + (errors === 1 ? " error" : " errors") +
        (warnings ? ", " + warnings + (warnings === 1 ? " warning" : " warnings") : "");
    }
    this.markLines();
  };

  Editor.prototype.drawGutter = function () {
    var count = this.text.value.split("\n").length;
    if (count !== this.lines) {
      while (this.gutter.firstChild) { this.gutter.removeChild(this.gutter.firstChild); }
      for (var n = 1; n <= count; n++) {
        var span = document.createElement("span");
        span.setAttribute("data-line", n);
        span.textContent = n;
        this.gutter.appendChild(span);
      }
      this.lines = count;
      this.markLines();
    }
    this.gutter.scrollTop = this.text.scrollTop;
  };

  Editor.prototype.markLines = function () {
    var spans = this.gutter.children;
    for (var i = 0; i < spans.length; i++) { spans[i].className = ""; }
    this.problems.forEach(function (problem) {
      var span = problem.line && spans[problem.line - 1];
      if (span && span.className !== "has-error") { span.className = "has-" + problem.severity; }
    });
  };

  Editor.prototype.goToLine = function (line) {
    var lines = this.text.value.split("\n");
    var offset = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) { offset += lines[i].length + 1; }
    this.text.focus();
    this.text.setSelectionRange(offset, offset + (lines[line - 1] || "").length);
    var lineHeight = this.text.scrollHeight / Math.max(lines.length, 1);
    this.text.scrollTop = Math.max(0, (line - 3) * lineHeight);
  };

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("editor");
    if (form) { window.fuzzballEditor = new Editor(form); }
  });
})();
