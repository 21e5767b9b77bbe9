/*! hato-bell: Hato's embeddable notification bell (issue 19). No framework, no build step.
 *
 *   <script src="https://hato.example.com/static/embed/hato-bell.js" async></script>
 *   <hato-bell base-url="https://hato.example.com" token-endpoint="/my-backend/hato-token"></hato-bell>
 *
 * token-endpoint: a URL of the product's own backend (same origin as the page, cookies sent) that answers
 * POST with {"token": "<user token>", "expires_at": <epoch seconds or ISO 8601>} for the signed-in user.
 * Optional attributes: lang (ja | en; default: the page's <html lang>), theme (light | dark; default: the
 * reader's colour scheme), inbox-url (default: base-url + "/inbox").
 * Bulk actions (issue 33): per row Mark read, Archive and Delete; Mark all read and Archive all in the header. A
 * delete or an "Archive all" offers Undo in the footer for as long as Hato's answer says (POST /v1/feed/undo).
 * Events (bubbling, composed): "hato-count" with detail {unread, unseen, badge} on every count.
 * A token scoped to a tenant (issue 32) gets that tenant's branding with each page: its logo beside the title
 * (https only; the host page's CSP img-src must allow the logo's host, else it is left out) and its colour on the
 * popover's top edge and unread marks (#rrggbb only, set through the CSSOM, so no inline style attribute).
 *
 * The live count comes over one websocket (base-url/v1/feed/socket) whose first message carries the token
 * (never the URL). Tokens are refreshed before they expire and handed to the open socket. A socket closed
 * with 4401 (token expired) fetches a new token and reconnects with exponential backoff and jitter, and
 * never more than MAX_OPENS sockets in any OPEN_WINDOW: a failing token endpoint cannot make a loop.
 */
// One function scope: a classic <script> must not leak these names into the page.
(() => {
const MAX_OPENS = 5;
const OPEN_WINDOW = 60000;
const BACKOFF_MIN = 1000;
const BACKOFF_MAX = 60000;
const PAGE_SIZE = 10;
// Close codes (app/realtime/hub.py): expired token; refused token; too many sockets; signed out.
const TOKEN_EXPIRED = 4401;
const NO_RETRY = [4008, 4001];

const STRINGS = {
  en: {
    title: "Notifications",
    bell: (n) => (n ? `Notifications, ${n > 99 ? "more than 99" : n} unread` : "Notifications, none unread"),
    markAll: "Mark all read",
    read: "Mark read",
    archive: "Archive",
    open: "Open inbox",
    close: "Close",
    empty: "You're all caught up.",
    loading: "Loading…",
    failed: "The notifications could not be loaded. Try again later.",
    didRead: (t) => `Marked “${t}” read.`,
    didArchive: (t) => `Archived “${t}”.`,
    didAll: "Everything is marked read.",
    unread: "Unread",
    arrived: (t) => `New notification: ${t}`,
    sent: "Sent",
    didAction: (l) => `Sent “${l}”.`,
    del: "Delete",
    archiveAll: "Archive all",
    undo: "Undo",
    didDelete: (t) => `Deleted “${t}”.`,
    didArchiveAll: (n) => `${n} notification${n === 1 ? "" : "s"} archived.`,
    undone: "Undone.",
  },
  ja: {
    title: "お知らせ",
    bell: (n) => (n ? `お知らせ、未読 ${n > 99 ? "99 件以上" : n + " 件"}` : "お知らせ、未読なし"),
    markAll: "すべて既読にする",
    read: "既読にする",
    archive: "アーカイブ",
    open: "受信箱を開く",
    close: "閉じる",
    empty: "新しいお知らせはありません。",
    loading: "読み込み中…",
    failed: "お知らせを読み込めませんでした。しばらくしてからもう一度お試しください。",
    didRead: (t) => `「${t}」を既読にしました。`,
    didArchive: (t) => `「${t}」をアーカイブしました。`,
    didAll: "すべて既読にしました。",
    unread: "未読",
    arrived: (t) => `新しいお知らせ: ${t}`,
    sent: "送信済み",
    didAction: (l) => `「${l}」を送信しました。`,
    del: "削除",
    archiveAll: "すべてアーカイブ",
    undo: "元に戻す",
    didDelete: (t) => `「${t}」を削除しました。`,
    didArchiveAll: (n) => `${n} 件のお知らせをアーカイブしました。`,
    undone: "元に戻しました。",
  },
};

const CSS = `
:host{--bg:#fff;--fg:#1a1a1a;--muted:#555;--line:#d0d0d0;--accent:#0b57d0;--badge:#b3261e;--badge-fg:#fff;--hover:#f1f4f9;
 all:initial;display:inline-block;position:relative;font:14px/1.4 system-ui,-apple-system,"Segoe UI","Hiragino Sans","Noto Sans JP",sans-serif;color:var(--fg)}
:host([theme=dark]){--bg:#1f1f1f;--fg:#ececec;--muted:#b8b8b8;--line:#444;--accent:#8ab4f8;--badge:#f2b8b5;--badge-fg:#601410;--hover:#2c2c2c}
@media (prefers-color-scheme:dark){:host(:not([theme=light])){--bg:#1f1f1f;--fg:#ececec;--muted:#b8b8b8;--line:#444;--accent:#8ab4f8;--badge:#f2b8b5;--badge-fg:#601410;--hover:#2c2c2c}}
*{box-sizing:border-box}
button,a{font:inherit;color:inherit}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.bell{position:relative;display:inline-flex;align-items:center;justify-content:center;width:44px;height:44px;border:0;border-radius:50%;background:transparent;cursor:pointer;color:var(--fg)}
.bell:hover{background:var(--hover)}
.bell svg{width:24px;height:24px;fill:currentColor}
.badge{position:absolute;top:2px;right:0;min-width:20px;height:20px;padding:0 5px;border-radius:10px;background:var(--badge);color:var(--badge-fg);font-size:12px;font-weight:700;line-height:20px;text-align:center}
.badge[hidden]{display:none}
.panel{position:absolute;right:0;top:48px;z-index:2147483000;width:min(380px,calc(100vw - 16px));max-height:min(70vh,560px);display:flex;flex-direction:column;background:var(--bg);color:var(--fg);border:1px solid var(--line);border-radius:10px;box-shadow:0 8px 28px rgba(0,0,0,.25)}
.panel[hidden]{display:none}
header,footer{display:flex;align-items:center;justify-content:space-between;gap:8px;padding:10px 12px}
header{border-bottom:1px solid var(--line)}
footer{border-top:1px solid var(--line)}
h2{margin:0;font-size:16px;font-weight:700}
.link,.act{border:0;background:none;padding:6px 8px;border-radius:6px;color:var(--accent);cursor:pointer;text-decoration:underline;min-height:32px}
.act{color:var(--fg);border:1px solid var(--line);text-decoration:none;font-size:13px}
.link:hover,.act:hover{background:var(--hover)}
ul{list-style:none;margin:0;padding:0;overflow:auto}
li{padding:10px 12px;border-bottom:1px solid var(--line)}
li:last-child{border-bottom:0}
li.unread{border-left:4px solid var(--accent);padding-left:8px}
.branded header{border-top:4px solid var(--brand);border-radius:10px 10px 0 0}
.branded li.unread{border-left-color:var(--brand)}
.who{display:flex;align-items:center;gap:8px;min-width:0}
.logo{height:24px;max-width:96px;object-fit:contain}
.logo[hidden]{display:none}
.t{font-weight:600;display:block;color:inherit}
a.t{color:var(--accent)}
.b{margin:2px 0 0;color:var(--muted);overflow-wrap:anywhere}
.m{display:flex;align-items:center;justify-content:space-between;gap:6px;margin-top:6px;color:var(--muted);font-size:12px}
.m span:last-child{display:flex;flex-wrap:wrap;justify-content:flex-end;gap:6px}
header>span:last-child{display:flex;flex-wrap:wrap;justify-content:flex-end}
.note{padding:16px 12px;margin:0;color:var(--muted)}
.sr{position:absolute;width:1px;height:1px;margin:-1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`;

const BELL_ICON =
  '<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1z"/></svg>';

let serial = 0;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== false && value != null) node.setAttribute(name, value === true ? "" : value);
  }
  node.append(...children);
  return node;
}

function epochMs(value) {
  return typeof value === "number" ? value * 1000 : Date.parse(value);
}

class HatoBell extends HTMLElement {
  static get observedAttributes() {
    return ["lang"];
  }

  constructor() {
    super();
    this._id = `hato-bell-${++serial}`;
    this._count = 0;
    this._opens = [];
    this._fails = 0;
    this._timers = new Set();
    const root = this.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${CSS}</style>`;
    this._button = el("button", {
      class: "bell",
      type: "button",
      part: "button",
      "aria-haspopup": "dialog",
      "aria-expanded": "false",
      "aria-controls": "panel",
      onclick: () => this.toggle(),
    });
    this._button.innerHTML = BELL_ICON;
    this._badge = el("span", { class: "badge", "aria-hidden": "true", hidden: true });
    this._button.append(this._badge);
    this._heading = el("h2", { id: "heading", tabindex: "-1" });
    this._logo = el("img", {
      class: "logo",
      alt: "",
      hidden: true,
      part: "logo",
      referrerpolicy: "no-referrer",
      onerror: () => {
        // Unreachable, or refused by the host page's CSP: left out, and not tried again on every page.
        this._logoBad = this._logo.getAttribute("src");
        this._logo.hidden = true;
      },
    });
    this._allButton = el("button", { class: "link", type: "button", onclick: () => this._readAll() });
    this._archiveAll = el("button", {
      class: "link",
      type: "button",
      onclick: () => this._bulk({ action: "archive", all: true }, (n) => this._t.didArchiveAll(n)),
    });
    this._undo = el("button", { class: "link", type: "button", hidden: true, onclick: () => this._undoLast() });
    this._list = el("ul", { "aria-labelledby": "heading" });
    this._note = el("p", { class: "note", role: "status" });
    this._inbox = el("a", { class: "link", target: "_blank", rel: "noopener" });
    this._closeButton = el("button", { class: "link", type: "button", onclick: () => this.close(true) });
    this._panel = el(
      "div",
      { class: "panel", id: "panel", role: "dialog", "aria-labelledby": "heading", hidden: true, part: "panel" },
      el("header", {}, el("span", { class: "who" }, this._logo, this._heading), el("span", {}, this._allButton, this._archiveAll)),
      this._note,
      this._list,
      el("footer", {}, this._inbox, this._undo, this._closeButton),
    );
    this._status = el("div", { class: "sr", role: "status", "aria-live": "polite" });
    root.append(this._button, this._panel, this._status);
    this._panel.addEventListener("keydown", (e) => this._keydown(e));
    this._button.addEventListener("keydown", (e) => e.key === "Escape" && this.close(true));
    this._outside = (e) => {
      if (!e.composedPath().includes(this)) this.close(false);
    };
  }

  get _t() {
    const wanted = (this.getAttribute("lang") || document.documentElement.lang || navigator.language || "en")
      .slice(0, 2)
      .toLowerCase();
    return STRINGS[wanted] || STRINGS.en;
  }

  get _lang() {
    return this._t === STRINGS.ja ? "ja" : "en";
  }

  get _base() {
    return (this.getAttribute("base-url") || "").replace(/\/+$/, "");
  }

  connectedCallback() {
    this._alive = true;
    this._label();
    this._connect(0);
  }

  disconnectedCallback() {
    this._alive = false;
    for (const timer of this._timers) clearTimeout(timer);
    this._timers.clear();
    document.removeEventListener("click", this._outside, true);
    if (this._ws) {
      const ws = this._ws;
      this._ws = null;
      ws.close(1000);
    }
  }

  attributeChangedCallback() {
    if (this._heading) this._label();
  }

  _label() {
    const t = this._t;
    this._heading.textContent = t.title;
    this._allButton.textContent = t.markAll;
    this._archiveAll.textContent = t.archiveAll;
    this._undo.textContent = t.undo;
    this._inbox.textContent = t.open;
    this._inbox.href = this.getAttribute("inbox-url") || `${this._base}/inbox`;
    this._closeButton.textContent = t.close;
    this._button.setAttribute("aria-label", t.bell(this._count));
  }

  _later(fn, ms) {
    const timer = setTimeout(() => {
      this._timers.delete(timer);
      fn();
    }, ms);
    this._timers.add(timer);
    return timer;
  }

  // --- tokens ---------------------------------------------------------------------------------

  _token() {
    // Reused until the last fifth of its lifetime (at most 15 s), when a fresh one is fetched.
    if (this._tok && this._exp - Date.now() > this._margin) return Promise.resolve(this._tok);
    if (!this._pending) {
      this._pending = this._fetchToken().finally(() => {
        this._pending = null;
      });
    }
    return this._pending;
  }

  async _fetchToken() {
    const response = await fetch(this.getAttribute("token-endpoint"), {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    if (!response.ok) throw new Error(`token endpoint: ${response.status}`);
    const body = await response.json();
    const exp = epochMs(body.expires_at);
    if (!body.token || !(exp > Date.now())) throw new Error("token endpoint: no usable token");
    const lifetime = exp - Date.now();
    this._tok = body.token;
    this._exp = exp;
    this._margin = Math.min(15000, lifetime / 5);
    // Refresh ahead of expiry (a fifth of the lifetime, at most a minute) and hand it to the open socket.
    clearTimeout(this._refreshTimer);
    this._refreshTimer = this._later(() => this._refresh(), lifetime - Math.min(60000, lifetime / 5));
    return this._tok;
  }

  async _refresh() {
    if (!this._alive) return;
    try {
      this._tok = null;
      const token = await this._token();
      if (this._ws && this._ws.readyState === WebSocket.OPEN) this._ws.send(JSON.stringify({ type: "auth", token }));
    } catch (e) {
      // The socket will close with 4401 when the old token runs out; reconnecting then backs off.
    }
  }

  async _fetch(path, method = "GET", body) {
    const call = async (token) =>
      fetch(`${this._base}/v1/feed${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          "Accept-Language": this._lang,
          ...(body ? { "Content-Type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
    let response = await call(await this._token());
    if (response.status === 401) {
      this._tok = null; // expired between our clock and Hato's: one fresh token, one retry
      response = await call(await this._token());
    }
    if (!response.ok) throw new Error(`feed: ${response.status}`);
    const data = await response.json();
    if (data.counts) this._setCount(data.counts);
    return data;
  }

  // --- the socket -----------------------------------------------------------------------------

  _connect(delay) {
    if (!this._alive || this._ws || this._connectTimer) return;
    const now = Date.now();
    this._opens = this._opens.filter((at) => now - at < OPEN_WINDOW);
    if (this._opens.length >= MAX_OPENS) delay = Math.max(delay, this._opens[0] + OPEN_WINDOW - now);
    this._connectTimer = this._later(() => {
      this._connectTimer = null;
      this._open();
    }, delay);
  }

  _retry() {
    this._fails += 1;
    const ceiling = Math.min(BACKOFF_MAX, BACKOFF_MIN * 2 ** this._fails);
    this._connect(ceiling / 2 + Math.random() * (ceiling / 2));
  }

  async _open() {
    if (!this._alive || this._ws) return;
    let token;
    try {
      token = await this._token();
    } catch (e) {
      this._retry();
      return;
    }
    if (!this._alive || this._ws) return;
    this._opens.push(Date.now());
    const ws = new WebSocket(`${this._base.replace(/^http/, "ws")}/v1/feed/socket`);
    this._ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: "auth", token, lang: this._lang }));
    ws.onmessage = (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      if (frame.type === "counts") {
        this._fails = 0;
        this._setCount(frame);
        if (frame.toasts && frame.toasts.length) {
          this._say(this._t.arrived(frame.toasts[frame.toasts.length - 1].title));
        }
        if (this.isOpen) this._load();
      }
      // Ack once shown: the server resends an unacked frame once, and counts a tab that answers as online.
      if (Number.isInteger(frame.seq) && ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ type: "ack", seq: frame.seq }));
      }
    };
    ws.onclose = (event) => {
      if (this._ws !== ws) return;
      this._ws = null;
      if (!this._alive || NO_RETRY.includes(event.code)) return;
      if (event.code === TOKEN_EXPIRED) this._tok = null;
      this._retry();
    };
  }

  // --- the count and the popover ------------------------------------------------------------

  _setCount(counts) {
    const n = counts.badge != null ? counts.badge : counts.unread;
    this._count = n;
    this._badge.textContent = n > 99 ? "99+" : String(n);
    this._badge.hidden = !n;
    this._button.setAttribute("aria-label", this._t.bell(n));
    this.setAttribute("count", String(n));
    this.dispatchEvent(new CustomEvent("hato-count", { detail: counts, bubbles: true, composed: true }));
  }

  _say(text) {
    this._status.textContent = "";
    this._later(() => {
      this._status.textContent = text;
    }, 50);
  }

  get isOpen() {
    return !this._panel.hidden;
  }

  toggle() {
    if (this.isOpen) this.close(true);
    else this.open();
  }

  open() {
    this._panel.hidden = false;
    // Right-aligned under the bell; a bell near a narrow screen's left edge would push it off: nudge it back in.
    this._panel.style.removeProperty("right");
    const left = this._panel.getBoundingClientRect().left;
    if (left < 8) this._panel.style.setProperty("right", `${left - 8}px`);
    this._button.setAttribute("aria-expanded", "true");
    document.addEventListener("click", this._outside, true);
    this._heading.focus();
    this._load(true);
    this._fetch("/seen", "POST").catch(() => {});
  }

  close(refocus) {
    if (!this.isOpen) return;
    this._panel.hidden = true;
    this._button.setAttribute("aria-expanded", "false");
    document.removeEventListener("click", this._outside, true);
    if (refocus) this._button.focus();
  }

  _keydown(event) {
    if (event.key === "Escape") {
      event.stopPropagation();
      this.close(true);
    } else if (event.key === "Tab") {
      // Keep Tab inside the open popover (its last control wraps to the first and back).
      const focusable = [...this._panel.querySelectorAll("a[href],button:not([disabled]):not([hidden])")];
      const first = focusable[0];
      const last = focusable[focusable.length - 1];
      const active = this.shadowRoot.activeElement;
      if (event.shiftKey && (active === first || active === this._heading)) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && active === last) {
        event.preventDefault();
        first.focus();
      }
    }
  }

  async _load(first) {
    const t = this._t;
    if (first && !this._list.children.length) this._note.textContent = t.loading;
    try {
      const page = await this._fetch(`?filter=all&limit=${PAGE_SIZE}`);
      this._brand(page.tenant);
      this._render(page.notifications);
    } catch (e) {
      this._note.textContent = t.failed;
    }
  }

  // The token's tenant (issue 32; Hato names only the token's own): its logo, its name as the logo's text, its
  // colour. Checked here again: an https logo, a #rrggbb colour; the name is only ever text.
  _brand(tenant) {
    const color = tenant && /^#[0-9a-f]{6}$/i.test(tenant.primary_color || "") ? tenant.primary_color : "";
    const logo = tenant && /^https:\/\/[^\s]+$/i.test(tenant.logo_url || "") ? tenant.logo_url : "";
    if (color) this._panel.style.setProperty("--brand", color);
    else this._panel.style.removeProperty("--brand");
    this._panel.classList.toggle("branded", !!color);
    this._logo.alt = logo ? String(tenant.name || "") : "";
    if (!logo) this._logo.removeAttribute("src");
    else if (this._logo.getAttribute("src") !== logo) this._logo.src = logo;
    this._logo.hidden = !logo || this._logoBad === logo;
  }

  _render(rows) {
    const t = this._t;
    const when = new Intl.DateTimeFormat(this._lang, { dateStyle: "medium", timeStyle: "short" });
    this._note.textContent = rows.length ? "" : t.empty;
    this._note.hidden = !!rows.length;
    this._list.replaceChildren(
      ...rows.map((n) => {
        const title = n.link
          ? el("a", { class: "t", href: n.link, target: "_blank", rel: "noopener", text: n.title })
          : el("span", { class: "t", text: n.title });
        const actions = el("span", {});
        if (n.unread) {
          actions.append(
            el("button", {
              class: "act",
              type: "button",
              text: t.read,
              "aria-label": `${t.read}: ${n.title}`,
              onclick: () => this._act(n, "read", t.didRead(n.title)),
            }),
          );
        }
        actions.append(
          el("button", {
            class: "act",
            type: "button",
            text: t.archive,
            "aria-label": `${t.archive}: ${n.title}`,
            onclick: () => this._act(n, "archive", t.didArchive(n.title)),
          }),
          el("button", {
            class: "act",
            type: "button",
            text: t.del,
            "aria-label": `${t.del}: ${n.title}`,
            onclick: () => this._bulk({ action: "delete", ids: [n.id] }, () => t.didDelete(n.title)),
          }),
        );
        const meta = el(
          "span",
          { class: "m" },
          el("span", {}, n.unread ? el("span", { class: "sr", text: `${t.unread}, ` }) : "", when.format(new Date(n.created_at))),
          actions,
        );
        return el(
          "li",
          { class: n.unread ? "unread" : false, "data-id": n.id },
          title,
          n.body ? el("p", { class: "b", text: n.body }) : "",
          this._buttons(n),
          meta,
        );
      }),
    );
  }

  // The notification's action buttons (issue 33): links open the product's page; a named action posts once and
  // then shows the product's answer (its state), or "Sent" until the answer comes.
  _buttons(n) {
    const t = this._t;
    const buttons = (n.actions || []).map((b) => {
      if (b.url) return el("a", { class: "act", href: b.url, target: "_blank", rel: "noopener", text: b.label });
      if (b.state || b.clicked) {
        return el("span", { class: "m", "data-action-state": b.name }, el("span", { class: "sr", text: `${b.label}: ` }), b.state || t.sent);
      }
      return el("button", {
        class: "act",
        type: "button",
        text: b.label,
        "data-action": b.name,
        "aria-label": `${b.label}: ${n.title}`,
        onclick: () => this._act(n, `actions/${encodeURIComponent(b.name)}`, t.didAction(b.label)),
      });
    });
    return buttons.length ? el("p", { class: "b" }, ...buttons) : "";
  }

  async _act(n, action, message) {
    try {
      await this._fetch(`/notifications/${n.id}/${action}`, "POST");
      this._say(message);
      await this._load();
      if (!this._panel.contains(this.shadowRoot.activeElement)) this._heading.focus();
    } catch (e) {
      this._say(this._t.failed);
    }
  }

  // One bulk call; its answer's undo token stays on the footer's Undo button until it expires.
  async _bulk(body, message) {
    try {
      const done = await this._fetch("/bulk", "POST", body);
      this._say(message(done.changed));
      clearTimeout(this._undoTimer);
      this._undoToken = done.undo && done.undo.token;
      this._undo.hidden = !this._undoToken;
      if (this._undoToken) this._undoTimer = this._later(() => (this._undo.hidden = true), done.undo.expires_in * 1000);
      await this._load();
      if (!this._panel.contains(this.shadowRoot.activeElement)) this._heading.focus();
    } catch (e) {
      this._say(this._t.failed);
    }
  }

  async _undoLast() {
    this._undo.hidden = true;
    try {
      await this._fetch("/undo", "POST", { token: this._undoToken });
      this._say(this._t.undone);
      await this._load();
    } catch (e) {
      this._say(this._t.failed);
    }
    this._heading.focus();
  }

  async _readAll() {
    try {
      await this._fetch("/read-all", "POST");
      this._say(this._t.didAll);
      await this._load();
    } catch (e) {
      this._say(this._t.failed);
    }
  }
}

if (!customElements.get("hato-bell")) customElements.define("hato-bell", HatoBell);
})();
