// The console's one script: progressive enhancement, no framework, no
// build step. Every page works without it; with it, the tenants table, the
// tenant page and its backups page follow changes live over server-sent
// events (/events), the buttons of forms confirmed by a typed name (delete
// a tenant, confirm a replacement, restore or delete a backup) wait for it, and
// a refused form puts the focus on its first wrong field. It builds
// elements with the DOM (textContent, never innerHTML) and sets no inline
// style, so the page's content security policy holds. docs/console.md
// describes the contract.
"use strict";

(function () {
  // Shows a notice in the page's live region, with an optional link.
  function notify(text, linkText, href) {
    var status = document.getElementById("live-status");
    if (!status) {
      return;
    }
    status.textContent = text;
    if (href) {
      var link = document.createElement("a");
      link.href = href;
      link.textContent = linkText;
      status.appendChild(document.createTextNode(" "));
      status.appendChild(link);
    }
    status.hidden = false;
  }

  function signInAgain() {
    return "/login?next=" + encodeURIComponent(location.pathname + location.search);
  }

  // Follows /events at `url`, calling `onUpdate` with each update. The
  // browser reconnects by itself after a dropped connection, sending the
  // last event id; an answer that is not a stream (401 once the session
  // has expired, or a redirect to the sign-in page) closes it for good.
  function listen(url, onUpdate) {
    if (!window.EventSource) {
      return;
    }
    var source = new EventSource(url);
    source.onmessage = function (message) {
      var update;
      try {
        update = JSON.parse(message.data);
      } catch (err) {
        return;
      }
      if (update.type === "RESYNC") {
        notify("Some changes could not be followed.", "Reload the page", location.href);
        return;
      }
      onUpdate(update);
    };
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) {
        notify("Your session expired, so live updates stopped.", "Sign in again", signInAgain());
      }
    };
    window.addEventListener("pagehide", function () {
      source.close();
    });
  }

  function setText(element, text) {
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  function cell(tag, className, text) {
    var element = document.createElement(tag);
    element.className = className;
    if (text !== undefined) {
      element.textContent = text;
    }
    return element;
  }

  function yesNo(value) {
    return value ? "yes" : "no";
  }

  // Why a tenant is not ready, as the server words it (summary.rs).
  function reasonText(tenant) {
    if (tenant.message) {
      return tenant.message;
    }
    return tenant.ready ? "none" : "no reason reported yet";
  }

  // The readiness of an element: its words and its data-ready, which the
  // stylesheet colours (green only when ready).
  function setReady(element, ready) {
    if (element) {
      setText(element, yesNo(ready));
      element.setAttribute("data-ready", yesNo(ready));
    }
  }

  // The tenants table: rows updated in place, added on the first page when
  // they match its filters, removed when deleted.
  function fillRow(row, tenant) {
    var phase = row.querySelector(".phase");
    setText(phase, tenant.phase);
    if (phase) {
      phase.setAttribute("data-phase", tenant.phase);
    }
    row.setAttribute("data-ready", yesNo(tenant.ready));
    setReady(row.querySelector(".ready"), tenant.ready);
    setText(row.querySelector(".message"), tenant.ready ? "" : reasonText(tenant));
    setText(row.querySelector(".kubernetes"), tenant.kubernetes);
    setText(row.querySelector(".talos"), tenant.talos);
    setText(row.querySelector(".machines"), tenant.machines);
  }

  function newRow(tenant) {
    var row = document.createElement("tr");
    row.setAttribute("data-tenant", tenant.name);
    var name = cell("th", "name");
    name.setAttribute("scope", "row");
    var link = document.createElement("a");
    link.href = "/tenants/" + encodeURIComponent(tenant.name);
    link.textContent = tenant.name;
    name.appendChild(link);
    row.appendChild(name);
    ["phase", "ready", "message", "kubernetes", "talos", "machines"].forEach(function (className) {
      row.appendChild(cell("td", className));
    });
    var age = cell("td", "age");
    var time = document.createElement("time");
    time.setAttribute("datetime", new Date().toISOString());
    time.textContent = "0s";
    age.appendChild(time);
    row.appendChild(age);
    fillRow(row, tenant);
    return row;
  }

  // The label selector is judged by the server: the stream is opened with
  // it, and each update says whether the tenant matches (`selected`).
  function matchesFilters(table, tenant) {
    var q = table.getAttribute("data-q") || "";
    var phase = table.getAttribute("data-phase") || "";
    return tenant.name.indexOf(q) >= 0 &&
      (phase === "" || tenant.phase === phase) &&
      tenant.selected !== false;
  }

  function findRow(body, name) {
    for (var i = 0; i < body.rows.length; i++) {
      if (body.rows[i].getAttribute("data-tenant") === name) {
        return body.rows[i];
      }
    }
    return null;
  }

  // The caption counts what the filters match, as the server did.
  function recount(table, change) {
    var body = table.tBodies[0];
    var total = Math.max(0, Number(table.getAttribute("data-total")) + change);
    table.setAttribute("data-total", String(total));
    var perPage = Number(table.getAttribute("data-per-page"));
    var first = (Number(table.getAttribute("data-page")) - 1) * perPage + 1;
    var caption = table.caption;
    if (!caption) {
      return;
    }
    if (body.rows.length === 0) {
      setText(caption, "Tenants: none on this page");
    } else {
      setText(caption, "Tenants " + first + " to " + (first + body.rows.length - 1) + " of " + total);
    }
  }

  function tenantsTable(table) {
    var body = table.tBodies[0];
    var page = Number(table.getAttribute("data-page"));
    var perPage = Number(table.getAttribute("data-per-page"));
    var url = "/events?since=" + encodeURIComponent(table.getAttribute("data-revision"));
    var label = table.getAttribute("data-label") || "";
    if (label !== "") {
      url += "&label=" + encodeURIComponent(label);
    }
    listen(url, function (tenant) {
      var row = findRow(body, tenant.name);
      if (tenant.type === "DELETED") {
        if (row) {
          row.remove();
        }
        if (row || matchesFilters(table, tenant)) {
          recount(table, -1);
        }
        return;
      }
      if (row) {
        fillRow(row, tenant);
        return;
      }
      if (tenant.type !== "ADDED" || !matchesFilters(table, tenant)) {
        return;
      }
      if (page !== 1) {
        recount(table, 1);
        return;
      }
      var before = null;
      for (var i = 0; i < body.rows.length && !before; i++) {
        if (body.rows[i].getAttribute("data-tenant") > tenant.name) {
          before = body.rows[i];
        }
      }
      if (!before && body.rows.length >= perPage) {
        recount(table, 1);
        return;
      }
      body.insertBefore(newRow(tenant), before);
      if (body.rows.length > perPage) {
        body.rows[body.rows.length - 1].remove();
      }
      recount(table, 1);
      var empty = document.getElementById("no-tenants");
      if (empty) {
        empty.hidden = true;
      }
    });
  }

  // The tenant page: the headline (ready, why not, phase) and the
  // conditions follow the tenant.
  function formatTime(iso) {
    var date = new Date(iso);
    if (isNaN(date.getTime())) {
      return iso;
    }
    return date.toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }

  function conditionRow(condition) {
    var row = document.createElement("tr");
    row.setAttribute("data-condition", condition.type);
    var kind = cell("th", "type", condition.type);
    kind.setAttribute("scope", "row");
    row.appendChild(kind);
    row.appendChild(cell("td", "status", condition.status));
    row.appendChild(cell("td", "reason", condition.reason || ""));
    row.appendChild(cell("td", "message", condition.message || ""));
    var last = cell("td", "last-transition");
    var time = document.createElement("time");
    time.setAttribute("datetime", condition.lastTransitionTime);
    time.textContent = formatTime(condition.lastTransitionTime);
    last.appendChild(time);
    row.appendChild(last);
    return row;
  }

  // The phase history: a phase the page has not shown last is appended
  // with the time the page saw it.
  function recordPhase(phase) {
    var list = document.getElementById("phase-history");
    var last = list && list.lastElementChild;
    if (!list || !phase || (last && last.getAttribute("data-phase") === phase)) {
      return;
    }
    var now = new Date().toISOString();
    var item = document.createElement("li");
    item.setAttribute("data-phase", phase);
    var time = document.createElement("time");
    time.setAttribute("datetime", now);
    time.textContent = formatTime(now);
    item.appendChild(time);
    item.appendChild(document.createTextNode(" " + phase));
    list.appendChild(item);
  }

  // The line that says where the tenant's last restore stands, in the
  // words of the server's backups.rs (restoring_text).
  function followRestoring(conditions) {
    var line = document.getElementById("restoring-condition");
    if (!line) {
      return;
    }
    var condition = null;
    (conditions || []).forEach(function (each) {
      if (each.type === "Restoring") {
        condition = each;
      }
    });
    var text = "No restore has run.";
    if (condition && condition.status === "True") {
      text = "Restoring: " + (condition.message || "");
    } else if (condition && condition.reason === "Restored") {
      text = "Restored: " + (condition.message || "");
    } else if (condition) {
      text = "Restore failed: " + (condition.message || "");
    }
    line.setAttribute("data-status", condition ? condition.status : "");
    line.setAttribute("data-reason", condition ? condition.reason || "" : "");
    setText(line, text);
  }

  // The backups page: the restore line follows the tenant's Restoring
  // condition; the list itself is what the page read.
  // Calls `update` with each change of the section's tenant after the
  // revision the page was read at; a deletion is told instead.
  function followTenant(section, update) {
    var name = section.getAttribute("data-tenant");
    var url = "/events?tenant=" + encodeURIComponent(name) +
      "&since=" + encodeURIComponent(section.getAttribute("data-revision"));
    listen(url, function (tenant) {
      if (tenant.name !== name) {
        return;
      }
      if (tenant.type === "DELETED") {
        notify("This tenant has been deleted.", "Back to the tenants", "/");
        return;
      }
      update(tenant);
    });
  }

  function backupsSection(section) {
    followTenant(section, function (tenant) {
      followRestoring(tenant.conditions);
    });
  }

  function tenantSection(section) {
    followTenant(section, function (tenant) {
      var phase = document.getElementById("phase");
      setText(phase, tenant.phase);
      if (phase) {
        phase.setAttribute("data-phase", tenant.phase);
      }
      recordPhase(tenant.phase);
      var headline = document.getElementById("headline");
      if (headline) {
        headline.setAttribute("data-ready", yesNo(tenant.ready));
        headline.setAttribute("data-phase", tenant.phase);
      }
      setReady(document.getElementById("ready"), tenant.ready);
      setText(document.getElementById("message-label"), tenant.ready ? "Message" : "Why not ready");
      setText(document.getElementById("message"), reasonText(tenant));
      var table = document.getElementById("conditions");
      if (table) {
        var body = document.createElement("tbody");
        (tenant.conditions || []).forEach(function (condition) {
          body.appendChild(conditionRow(condition));
        });
        table.replaceChild(body, table.tBodies[0]);
      }
      followRestoring(tenant.conditions);
    });
  }

  // A form confirmed by typing a name (the tenant's delete form, a
  // machine's replacement, a backup's restore and delete): its button
  // waits until the name in its data-name is typed.
  function deleteForm(form) {
    var input = form.querySelector("input[name=confirm]");
    var button = form.querySelector("button[type=submit]");
    if (!input || !button) {
      return;
    }
    var check = function () {
      button.disabled = input.value.trim() !== form.getAttribute("data-name");
    };
    input.addEventListener("input", check);
    check();
  }

  // A read-only field marked data-copy (a new API token) gets a Copy
  // button: it writes the value to the clipboard when the browser allows
  // it, and otherwise selects the text for the operator to copy. What
  // happened is said in the element whose id is the field's id + "-status".
  function copyButton(input) {
    var status = document.getElementById(input.id + "-status");
    var say = function (text) {
      if (status) {
        status.textContent = text;
      }
    };
    var select = function () {
      input.focus();
      input.select();
      say("The token is selected: press Ctrl+C (or Command+C) to copy it.");
    };
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = "Copy";
    button.addEventListener("click", function () {
      if (!navigator.clipboard || !navigator.clipboard.writeText) {
        select();
        return;
      }
      navigator.clipboard.writeText(input.value).then(function () {
        say("Copied to the clipboard.");
      }, select);
    });
    input.parentNode.insertBefore(button, input.nextSibling);
  }

  var table = document.getElementById("tenants");
  if (table) {
    tenantsTable(table);
  }
  var section = document.getElementById("tenant");
  if (section) {
    tenantSection(section);
  }
  var backups = document.getElementById("backups");
  if (backups) {
    backupsSection(backups);
  }
  document.querySelectorAll("form#delete-tenant, form.confirm-replacement, form.restore-backup, form.delete-backup")
    .forEach(deleteForm);
  document.querySelectorAll("input[data-copy]").forEach(copyButton);
  var invalid = document.querySelector("[aria-invalid=true]");
  if (invalid) {
    invalid.focus();
  }
})();
