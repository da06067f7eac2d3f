// The machine page's logs panel (machine.rs), loaded on that page only. It
// reads one of the machine's logs from the form's action
// (/tenants/{name}/machines/{id}/logs), a stream of server-sent events read
// with fetch rather than EventSource: a refusal's message can then be shown,
// and nothing reconnects by itself to show lines twice. Each line is
// appended with textContent (never innerHTML), the last data-lines lines
// are kept, and the read stops on Stop, when "Follow new lines" is cleared,
// on a new read, or when the page goes away. docs/console.md describes the
// contract.
"use strict";

(function () {
  var form = document.getElementById("logs-form");
  var output = document.getElementById("logs-output");
  var status = document.getElementById("logs-status");
  var stop = document.getElementById("logs-stop");
  var follow = document.getElementById("logs-follow");
  if (!form || !output || !status || !stop || !follow || !window.fetch || !window.AbortController ||
      !window.TextDecoder) {
    return;
  }
  var limit = Number(form.getAttribute("data-lines")) || 2000;
  // The read under way: its AbortController, what it reads, its lines.
  var current = null;

  function say(text) {
    status.textContent = text;
  }

  function lines(count) {
    return count === 1 ? "1 line" : count + " lines";
  }

  // Appends one line, dropping the oldest past the limit, and keeps the
  // view at the end when it was there.
  function append(read, text) {
    var atEnd = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    var line = document.createElement("span");
    line.className = "line";
    line.textContent = text + "\n";
    output.appendChild(line);
    while (output.childNodes.length > limit) {
      output.removeChild(output.firstChild);
    }
    read.count += 1;
    output.setAttribute("data-count", String(read.count));
    if (atEnd) {
      output.scrollTop = output.scrollHeight;
    }
  }

  // Ends the read under way with `state` (ended, failed, stopped) and says why.
  function finish(read, state, text) {
    if (current !== read) {
      return;
    }
    current = null;
    read.controller.abort();
    stop.disabled = true;
    output.setAttribute("data-state", state);
    say(read.label + ": " + text + " (" + lines(read.count) + " shown)");
  }

  // What a refused read says: the console's error page's #failure.
  function refusal(response, body) {
    if (response.status === 401 || response.redirected) {
      return "your session expired; sign in again to read logs.";
    }
    var page = new DOMParser().parseFromString(body, "text/html");
    var failure = page.getElementById("failure");
    return failure ? failure.textContent : "the log could not be read (status " + response.status + ").";
  }

  // One event of the stream: a line, or the named event that ends it.
  function dispatch(read, block) {
    var name = "message";
    var data = [];
    block.split("\n").forEach(function (field) {
      if (field.indexOf("data:") === 0) {
        data.push(field.slice(field.charAt(5) === " " ? 6 : 5));
      } else if (field.indexOf("event:") === 0) {
        name = field.slice(6).trim();
      }
    });
    if (data.length === 0) {
      return;
    }
    if (name === "message") {
      append(read, data.join("\n"));
    } else {
      finish(read, name === "end" ? "ended" : "failed", data.join(" "));
    }
  }

  function pump(read, reader, decoder, buffer) {
    return reader.read().then(function (step) {
      if (current !== read) {
        return;
      }
      if (step.done) {
        finish(read, "failed", "the stream closed.");
        return;
      }
      buffer += decoder.decode(step.value, { stream: true });
      var end = buffer.indexOf("\n\n");
      while (end >= 0 && current === read) {
        dispatch(read, buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
      }
      return pump(read, reader, decoder, buffer);
    });
  }

  function open(url, label, following) {
    if (current) {
      finish(current, "stopped", "stopped.");
    }
    var read = { controller: new AbortController(), label: label, count: 0 };
    current = read;
    output.textContent = "";
    output.setAttribute("data-count", "0");
    output.setAttribute("data-state", "opening");
    stop.disabled = false;
    say(label + ": opening…");
    var init = { signal: read.controller.signal, credentials: "same-origin", cache: "no-store",
      headers: { Accept: "text/event-stream" } };
    fetch(url, init).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (!response.ok || type.indexOf("text/event-stream") !== 0) {
        return response.text().then(function (body) {
          finish(read, "failed", refusal(response, body));
        });
      }
      output.setAttribute("data-state", "open");
      say(label + (following ? ": following new lines." : ": reading."));
      return pump(read, response.body.getReader(), new TextDecoder(), "");
    }).catch(function () {
      finish(read, "failed", "the connection broke off.");
    });
  }

  form.addEventListener("submit", function (submitted) {
    submitted.preventDefault();
    var service = form.elements.service.value;
    var tail = form.elements.tail.value;
    var url = form.getAttribute("action") + "?service=" + encodeURIComponent(service) +
      "&tail=" + encodeURIComponent(tail) + "&follow=" + (follow.checked ? "true" : "false");
    open(url, service, follow.checked);
  });
  stop.addEventListener("click", function () {
    if (current) {
      finish(current, "stopped", "stopped.");
    }
  });
  follow.addEventListener("change", function () {
    if (!follow.checked && current) {
      finish(current, "stopped", "stopped following.");
    }
  });
  window.addEventListener("pagehide", function () {
    if (current) {
      current.controller.abort();
    }
  });
})();
