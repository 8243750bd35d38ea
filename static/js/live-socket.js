// The pages' one websocket client: connect, reconnect after a drop with exponential backoff and
// jitter, reconnect at once when the browser comes back online, and keep the connection's state
// visible ("live", "reconnecting in 4 s", "offline", "not available").

// Refusals (not signed in, not allowed, no such job or run): retrying would be refused again.
const REFUSED = new Set([4401, 4403, 4404]);
const BASE_MS = 500;
const MAX_MS = 30_000;
// A connection that stayed up this long was healthy: the next drop starts the backoff over,
// while a server that accepts and drops at once still backs off.
const STABLE_MS = 5_000;

// The delay before attempt `n` (1, 2, ...): doubling up to MAX_MS, then a random half of it
// ("equal jitter"), so that pages dropped together do not all come back in the same instant.
export function backoffDelay(n, random = Math.random) {
  const ceiling = Math.min(MAX_MS, BASE_MS * 2 ** n);
  return ceiling / 2 + random() * (ceiling / 2);
}

// The label showing the state: the element with id `live-state`, or one made next to `after`.
export function liveStateLabel(after) {
  let label = document.getElementById("live-state");
  if (!label) {
    label = document.createElement("span");
    label.id = "live-state";
    label.title = "Live connection";
    after.insertAdjacentElement("afterend", label);
  }
  label.setAttribute("role", "status");
  return label;
}

// Opens `path` (e.g. "/ws/runs/7/") and calls `onMessage` with each message's parsed JSON.
// The server sends what a page needs on every (re)connection (a run's snapshot), so a page
// resumes from there. Returns `{close}` to stop for good.
export function openLiveSocket({ path, onMessage, label }) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let socket = null;
  let attempt = 0;
  let openedAt = 0;
  let retryTimer = null;
  let countdown = null;
  let stopped = false;

  // `state` (live, connecting, reconnecting, offline, refused) is for styles and tests.
  function show(state, text = state) {
    label.textContent = text;
    label.className = `live-state ${state === "live" ? "on" : "off"}`;
    label.dataset.state = state;
  }

  function connect() {
    clearRetry();
    if (stopped) return;
    // Not gated on navigator.onLine: a browser with no network but loopback (or only a LAN)
    // calls itself offline while the page's server answers. The "offline" event is the hint.
    show("connecting", "connecting…");
    const opened = new WebSocket(`${scheme}://${location.host}${path}`);
    socket = opened;
    opened.addEventListener("open", () => { openedAt = Date.now(); show("live"); });
    opened.addEventListener("message", (message) => onMessage(JSON.parse(message.data)));
    opened.addEventListener("close", (event) => onClose(event, opened));
  }

  function onClose(event, closed) {
    if (closed !== socket || stopped) return;  // a socket this client already let go
    socket = null;
    if (REFUSED.has(event.code)) { show("refused", "not available"); return; }
    if (openedAt && Date.now() - openedAt >= STABLE_MS) attempt = 0;
    openedAt = 0;
    attempt += 1;
    scheduleRetry(backoffDelay(attempt));
  }

  function scheduleRetry(delayMs) {
    const due = Date.now() + delayMs;
    const tick = () => show("reconnecting",
      `reconnecting in ${Math.max(1, Math.ceil((due - Date.now()) / 1000))} s`);
    tick();
    countdown = setInterval(tick, 1000);
    retryTimer = setTimeout(connect, delayMs);
  }

  function clearRetry() {
    clearTimeout(retryTimer);
    clearInterval(countdown);
    retryTimer = countdown = null;
  }

  // A browser that lost its network may keep a dead socket open for minutes: let it go now,
  // and come back as soon as the network does.
  window.addEventListener("offline", () => {
    if (stopped) return;
    clearRetry();
    const dead = socket;
    socket = null;
    if (dead) dead.close();
    show("offline");
  });
  window.addEventListener("online", () => {
    if (stopped || socket) return;
    attempt = 0;
    connect();
  });

  connect();
  return {
    close() {
      stopped = true;
      clearRetry();
      if (socket) socket.close();
    },
  };
}
