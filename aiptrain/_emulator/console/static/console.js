// The aiptrain console's behaviour: live rows and panels, the job's log (last page, earlier pages,
// new lines as server-sent events), cancel, and sortable trials. Every page works without it but
// does not move; it runs under a policy that allows no inline script, so it binds everything here.
"use strict";

(function () {
  const REFRESH_MS = 3000;
  const MAX_LOG_LINES = 20000;

  function csrfToken() {
    const meta = document.querySelector('meta[name="aiptrain-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }

  async function fetchText(url) {
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    return { ok: response.ok, status: response.status, text: await response.text() };
  }

  function every(milliseconds, task) {
    let running = false;
    const timer = setInterval(async () => {
      if (document.hidden || running) return;
      running = true;
      try { await task(); } catch (error) { /* the next round tries again */ } finally { running = false; }
    }, milliseconds);
    return () => clearInterval(timer);
  }

  // -- any page: the project switcher ------------------------------------------------------------
  for (const select of document.querySelectorAll("select.autosubmit")) {
    select.addEventListener("change", () => select.form.submit());
  }

  // -- the jobs page: rows that follow the store -------------------------------------------------
  const jobsTable = document.querySelector("table.jobs[data-live]");
  if (jobsTable) {
    const body = jobsTable.querySelector("tbody");
    every(REFRESH_MS, async () => {
      const answer = await fetchText(jobsTable.dataset.live);
      if (answer.ok) body.innerHTML = answer.text;  // markup the server escaped
    });
  }

  // -- the job page --------------------------------------------------------------------------------
  const jobPage = document.querySelector(".job[data-live]");
  if (jobPage) setUpJob(jobPage);

  function setUpJob(page) {
    const cancel = document.getElementById("cancel");
    const badge = () => document.querySelector("#job-title .state");
    let terminal = page.dataset.terminal === "true";
    let stopRefresh = null;

    function showState(state, isTerminal) {
      const shown = badge();
      if (shown && shown.dataset.state !== state) {
        shown.textContent = state;
        shown.dataset.state = state;
        shown.className = "state state-" + state.toLowerCase();
      }
      page.dataset.state = state;
      if (cancel) cancel.hidden = isTerminal || state === "CANCELLING";
    }

    async function refreshPanels() {
      const response = await fetch(page.dataset.live, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const answer = await response.json();
      for (const [name, markup] of Object.entries(answer.panels)) {
        const panel = document.getElementById(name);
        if (panel && panel.innerHTML !== markup) {
          panel.innerHTML = markup;
          if (name === "trials") applySort(panel);
        }
      }
      showState(answer.state, answer.terminal);
      if (answer.terminal && !terminal) terminal = true;
      if (terminal && stopRefresh) { stopRefresh(); stopRefresh = null; }
    }

    if (!terminal) stopRefresh = every(REFRESH_MS, refreshPanels);

    if (cancel) {
      cancel.addEventListener("click", async () => {
        if (!window.confirm("Cancel this job? Its replicas are stopped.")) return;
        cancel.disabled = true;
        const response = await fetch(cancel.dataset.url, {
          method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrfToken() },
        });
        const answer = await response.json().catch(() => ({}));
        cancel.disabled = false;
        if (response.ok) {
          showState(answer.state, false);
          await refreshPanels();
        } else {
          window.alert(answer.error || "The job could not be cancelled (HTTP " + response.status + ").");
        }
      });
    }

    const logs = document.getElementById("logs");
    if (logs) setUpLogs(logs, (state) => {
      if (state !== page.dataset.state) refreshPanels();
    });
    for (const table of document.querySelectorAll("table.sortable")) bindSort(table);
  }

  // -- the job's log ---------------------------------------------------------------------------------
  function setUpLogs(section, onJobState) {
    const lines = section.querySelector(".log-lines");
    const earlier = section.querySelector("button.earlier");
    const status = section.querySelector(".log-status");
    const form = section.querySelector("form.toolbar");
    const follow = form.elements.follow;
    let source = null;
    let earlierCursor = null;
    let generation = 0;

    function query(extra) {
      const parameters = new URLSearchParams();
      if (form.elements.severity.value) parameters.set("severity", form.elements.severity.value);
      if (form.elements.task.value) parameters.set("task", form.elements.task.value);
      for (const [key, value] of Object.entries(extra)) if (value) parameters.set(key, value);
      const text = parameters.toString();
      return text ? "?" + text : "";
    }

    function line(entry) {
      const row = document.createElement("div");
      row.className = "line sev-" + entry.s.toLowerCase();
      row.dataset.c = entry.c;
      const parts = [
        ["time", entry.t.replace("T", " ").replace("Z", "")],
        ["sev", entry.s],
        ["task", entry.r ? entry.k + " · trial " + entry.r : entry.k],
        ["msg", entry.m],
      ];
      for (const [kind, text] of parts) {
        const part = document.createElement("span");
        part.className = kind;
        part.textContent = text;
        row.appendChild(part);
      }
      return row;
    }

    function atBottom() {
      return lines.scrollHeight - lines.scrollTop - lines.clientHeight < 24;
    }

    function append(entries) {
      if (!entries.length) return;
      const fragment = document.createDocumentFragment();
      for (const entry of entries) fragment.appendChild(line(entry));
      lines.appendChild(fragment);
      let dropped = null;
      while (lines.childElementCount > MAX_LOG_LINES) {
        dropped = lines.firstElementChild;
        dropped.remove();
      }
      if (dropped) {  // the page before the first line shown ends with the last line dropped
        earlierCursor = dropped.dataset.c;
        earlier.hidden = false;
      }
      if (follow.checked) lines.scrollTop = lines.scrollHeight;
    }

    function prepend(entries) {
      const fragment = document.createDocumentFragment();
      for (const entry of entries) fragment.appendChild(line(entry));
      const before = lines.scrollHeight;
      lines.insertBefore(fragment, lines.firstChild);
      lines.scrollTop += lines.scrollHeight - before;
    }

    function say(text) { status.textContent = text; }

    function stream(after) {
      if (source) source.close();
      source = new EventSource(section.dataset.stream + query({ after: after }));
      source.addEventListener("lines", (event) => append(JSON.parse(event.data)));
      source.addEventListener("job", (event) => {
        const state = JSON.parse(event.data).state;
        say("following: " + state);
        onJobState(state);
      });
      source.addEventListener("end", () => {
        source.close();
        source = null;
        say("the job ended; this is its whole log");
        section.dataset.ended = "true";
      });
      source.addEventListener("error", () => { if (source) say("reconnecting…"); });
    }

    async function load() {
      const mine = ++generation;
      if (source) { source.close(); source = null; }
      section.dataset.ended = "false";
      say("loading…");
      const response = await fetch(section.dataset.page + query({}), { credentials: "same-origin", cache: "no-store" });
      if (mine !== generation) return;
      const answer = await response.json();
      if (!response.ok) { say(answer.error || "the log could not be read"); return; }
      lines.replaceChildren();
      append(answer.entries);
      lines.scrollTop = lines.scrollHeight;
      earlierCursor = answer.earlier;
      earlier.hidden = !earlierCursor;
      say(answer.entries.length ? "" : "no lines yet");
      stream(answer.end);
    }

    earlier.addEventListener("click", async () => {
      if (!earlierCursor) return;
      earlier.disabled = true;
      const response = await fetch(section.dataset.page + query({ before: earlierCursor }),
                                   { credentials: "same-origin", cache: "no-store" });
      earlier.disabled = false;
      if (!response.ok) return;
      const answer = await response.json();
      prepend(answer.entries);
      earlierCursor = answer.earlier;
      earlier.hidden = !earlierCursor;
    });
    form.addEventListener("change", (event) => { if (event.target.name !== "follow") load(); });
    form.addEventListener("submit", (event) => event.preventDefault());
    lines.addEventListener("scroll", () => { follow.checked = atBottom(); });
    load();
  }

  // -- sortable tables (the trials) ----------------------------------------------------------------
  const sortState = new WeakMap();

  function bindSort(table) {
    table.addEventListener("click", (event) => {
      const button = event.target.closest("button.sort");
      if (!button || !table.contains(button)) return;
      const header = button.closest("th");
      const column = Array.prototype.indexOf.call(header.parentNode.children, header);
      const previous = sortState.get(table.closest(".panel")) || {};
      const ascending = previous.column === column ? !previous.ascending : true;
      sortState.set(table.closest(".panel"), { column: column, ascending: ascending, kind: button.dataset.sort });
      sortRows(table, column, ascending, button.dataset.sort);
    });
  }

  function applySort(panel) {
    const table = panel.querySelector("table.sortable");
    if (!table) return;
    bindSort(table);
    const state = sortState.get(panel);
    if (state) sortRows(table, state.column, state.ascending, state.kind);
  }

  function sortRows(table, column, ascending, kind) {
    const body = table.tBodies[0];
    const value = (row) => row.children[column].dataset.value;
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = value(a), y = value(b);
      if (x === "" || y === "") return x === y ? 0 : (x === "" ? 1 : -1);  // empty last, either way
      const order = kind === "number" ? Number(x) - Number(y) : x.localeCompare(y);
      return ascending ? order : -order;
    });
    for (const row of rows) body.appendChild(row);
    for (const [index, header] of Array.from(table.tHead.rows[0].cells).entries()) {
      header.setAttribute("aria-sort", index === column ? (ascending ? "ascending" : "descending") : "none");
    }
  }
})();
