// A small TeX-to-MathML renderer for text/latex outputs and $…$ in Markdown: the common
// subset (fractions, roots, scripts, Greek, operators and relations, accents, \left…\right,
// matrices, cases and aligned rows, \text and font commands). Browsers draw MathML
// themselves (MathML Core), so no fonts ship with the view. An unknown command is shown as
// its name; a formula the parser gives up on is shown as its source. Nodes are built with
// DOM calls: the TeX never becomes markup.

const NS = "http://www.w3.org/1998/Math/MathML";

const SYMBOLS: Record<string, string> = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", zeta: "ζ",
  eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
  xi: "ξ", pi: "π", varpi: "ϖ", rho: "ρ", varrho: "ϱ", sigma: "σ", varsigma: "ς", tau: "τ",
  upsilon: "υ", phi: "ϕ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ",
  Theta: "Θ", Lambda: "Λ", Xi: "Ξ", Pi: "Π", Sigma: "Σ", Upsilon: "Υ", Phi: "Φ", Psi: "Ψ",
  Omega: "Ω", infty: "∞", partial: "∂", nabla: "∇", ell: "ℓ", hbar: "ℏ", emptyset: "∅",
  forall: "∀", exists: "∃", neg: "¬", ldots: "…", cdots: "⋯", vdots: "⋮", ddots: "⋱",
  dots: "…", prime: "′", Re: "ℜ", Im: "ℑ", aleph: "ℵ", angle: "∠", circ: "∘", bullet: "∙",
};

const OPERATORS: Record<string, string> = {
  pm: "±", mp: "∓", times: "×", div: "÷", cdot: "⋅", ast: "∗", star: "⋆", leq: "≤", le: "≤",
  geq: "≥", ge: "≥", neq: "≠", ne: "≠", approx: "≈", equiv: "≡", sim: "∼", simeq: "≃",
  cong: "≅", propto: "∝", ll: "≪", gg: "≫", in: "∈", notin: "∉", ni: "∋", subset: "⊂",
  supset: "⊃", subseteq: "⊆", supseteq: "⊇", cup: "∪", cap: "∩", setminus: "∖", wedge: "∧",
  land: "∧", vee: "∨", lor: "∨", oplus: "⊕", otimes: "⊗", to: "→", rightarrow: "→",
  leftarrow: "←", gets: "←", Rightarrow: "⇒", Leftarrow: "⇐", leftrightarrow: "↔",
  Leftrightarrow: "⇔", iff: "⟺", implies: "⟹", mapsto: "↦", uparrow: "↑", downarrow: "↓",
  mid: "∣", parallel: "∥", perp: "⊥", langle: "⟨", rangle: "⟩", lfloor: "⌊", rfloor: "⌋",
  lceil: "⌈", rceil: "⌉", vert: "|", Vert: "‖", lbrace: "{", rbrace: "}", colon: ":",
};

const LARGE: Record<string, string> = {
  sum: "∑", prod: "∏", coprod: "∐", int: "∫", iint: "∬", iiint: "∭", oint: "∮",
  bigcup: "⋃", bigcap: "⋂", bigoplus: "⨁", bigotimes: "⨂",
};

const FUNCTIONS = new Set([
  "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh",
  "tanh", "log", "ln", "lg", "exp", "det", "dim", "ker", "deg", "gcd", "max", "min", "sup",
  "inf", "lim", "liminf", "limsup", "arg", "Pr", "hom", "mod", "tr", "rank",
]);

const ACCENTS: Record<string, string> = {
  hat: "^", widehat: "^", bar: "¯", overline: "¯", vec: "→", tilde: "~", widetilde: "~",
  dot: "˙", ddot: "¨", check: "ˇ", breve: "˘", acute: "´", grave: "`",
};

const SPACES: Record<string, string> = { ",": "0.17em", ":": "0.22em", ";": "0.28em", "!": "-0.17em", quad: "1em", qquad: "2em", " ": "0.25em" };

class Parser {
  private i = 0;
  constructor(private src: string, private display: boolean) {}

  el(name: string, ...kids: (Node | string)[]): Element {
    const e = document.createElementNS(NS, name);
    for (const k of kids) e.append(k);
    return e;
  }

  peek(): string {
    return this.src[this.i] ?? "";
  }

  /** Atoms until one of `stop` (a closing brace, \right, \end, & or \\) or the end. */
  parseRow(stop: (tok: string) => boolean): Element {
    const row = this.el("mrow");
    for (;;) {
      this.skipSpace();
      if (this.i >= this.src.length) break;
      const save = this.i;
      const tok = this.token();
      if (stop(tok)) {
        this.i = save;
        break;
      }
      this.i = save;
      const atom = this.parseAtom();
      if (atom) row.append(this.scripts(atom));
    }
    return row;
  }

  skipSpace(): void {
    while (/\s/.test(this.peek())) this.i++;
  }

  /** The next token without interpreting it: `\name`, `\,`, or one character. */
  token(): string {
    const c = this.src[this.i++] ?? "";
    if (c !== "\\") return c;
    const m = /^[a-zA-Z]+|^./.exec(this.src.slice(this.i));
    const name = m ? m[0] : "";
    this.i += name.length;
    return "\\" + name;
  }

  group(): Element {
    this.skipSpace();
    if (this.peek() === "{") {
      this.i++;
      const row = this.parseRow((t) => t === "}");
      this.i++;
      return row;
    }
    return this.parseAtom() ?? this.el("mrow");
  }

  rawGroup(): string {
    this.skipSpace();
    if (this.peek() !== "{") return this.token();
    let depth = 0;
    const start = this.i + 1;
    for (; this.i < this.src.length; this.i++) {
      if (this.src[this.i] === "{") depth++;
      else if (this.src[this.i] === "}" && --depth === 0) break;
    }
    return this.src.slice(start, this.i++);
  }

  scripts(base: Element): Element {
    let sub: Element | null = null;
    let sup: Element | null = null;
    for (;;) {
      this.skipSpace();
      const c = this.peek();
      if (c === "_" && !sub) {
        this.i++;
        sub = this.group();
      } else if (c === "^" && !sup) {
        this.i++;
        sup = this.group();
      } else if (c === "'") {
        this.i++;
        sup = this.el("mo", "′");
      } else break;
    }
    const under = this.display && base.getAttribute("data-limits") === "1";
    if (sub && sup) return this.el(under ? "munderover" : "msubsup", base, sub, sup);
    if (sub) return this.el(under ? "munder" : "msub", base, sub);
    if (sup) return this.el(under ? "mover" : "msup", base, sup);
    return base;
  }

  parseAtom(): Element | null {
    const tok = this.token();
    if (tok === "{") {
      const row = this.parseRow((t) => t === "}");
      this.i++;
      return row;
    }
    if (tok.startsWith("\\") && tok.length > 1) return this.command(tok.slice(1));
    if (/[0-9.]/.test(tok)) {
      let n = tok;
      while (/[0-9.]/.test(this.peek())) n += this.src[this.i++];
      return this.el("mn", n);
    }
    if (/[a-zA-Z]/.test(tok)) return this.el("mi", tok);
    if (tok === "~") return this.space("0.25em");
    if (tok === "&" || tok === "}") return null;
    return this.el("mo", tok);
  }

  space(width: string): Element {
    const s = this.el("mspace");
    s.setAttribute("width", width);
    return s;
  }

  command(name: string): Element {
    if (name in SYMBOLS) {
      const mi = this.el("mi", SYMBOLS[name]);
      if (/^[A-Z]/.test(name)) mi.setAttribute("mathvariant", "normal");
      return mi;
    }
    if (name in OPERATORS) return this.el("mo", OPERATORS[name]);
    if (name in LARGE) {
      const mo = this.el("mo", LARGE[name]);
      mo.setAttribute("largeop", "true");
      if (!name.includes("int")) mo.setAttribute("data-limits", "1");
      return mo;
    }
    if (FUNCTIONS.has(name)) {
      const mi = this.el("mi", name);
      mi.setAttribute("mathvariant", "normal");
      if (["lim", "max", "min", "sup", "inf", "liminf", "limsup"].includes(name)) mi.setAttribute("data-limits", "1");
      return mi;
    }
    if (name in SPACES) return this.space(SPACES[name]);
    if (name in ACCENTS) {
      const over = this.el("mover", this.group(), this.el("mo", ACCENTS[name]));
      over.setAttribute("accent", "true");
      return over;
    }
    return this.structure(name);
  }

  structure(name: string): Element {
    switch (name) {
      case "frac": case "dfrac": case "tfrac": case "cfrac":
        return this.el("mfrac", this.group(), this.group());
      case "binom": {
        const f = this.el("mfrac", this.group(), this.group());
        f.setAttribute("linethickness", "0");
        return this.el("mrow", this.el("mo", "("), f, this.el("mo", ")"));
      }
      case "sqrt": {
        this.skipSpace();
        if (this.peek() === "[") {
          this.i++;
          const index = this.parseRow((t) => t === "]");
          this.i++;
          return this.el("mroot", this.group(), index);
        }
        return this.el("msqrt", this.group());
      }
      case "text": case "textrm": case "mbox": case "textit": case "textbf": case "operatorname":
        return this.el(name === "operatorname" ? "mi" : "mtext", this.rawGroup());
      case "mathrm": case "mathbf": case "mathit": case "mathbb": case "mathcal": case "boldsymbol": case "mathsf": case "mathtt":
        return this.font(name, this.group());
      case "left": case "right": case "big": case "Big": case "bigg": case "Bigg": case "bigl": case "bigr": case "Bigl": case "Bigr": {
        this.skipSpace();
        const d = this.token();
        const text = d.startsWith("\\") ? (OPERATORS[d.slice(1)] ?? d.slice(1)) : d;
        const mo = this.el("mo", text === "." ? "" : text);
        mo.setAttribute("stretchy", "true");
        return mo;
      }
      case "begin":
        return this.environment(this.rawGroup());
      case "\\":
        return this.el("mspace");
      default:
        return this.el("mtext", "\\" + name);
    }
  }

  font(name: string, body: Element): Element {
    const row = this.el("mrow", body);
    const variants: Record<string, string> = { mathbb: "double-struck", mathcal: "script", mathsf: "sans-serif", mathtt: "monospace" };
    if (name === "mathrm") body.querySelectorAll("mi").forEach((m) => m.setAttribute("mathvariant", "normal"));
    if (name === "mathbf" || name === "boldsymbol") row.setAttribute("style", "font-weight:bold");
    if (name in variants) body.querySelectorAll("mi").forEach((m) => m.setAttribute("mathvariant", variants[name]));
    return row;
  }

  environment(env: string): Element {
    const table = this.el("mtable");
    const isEnd = (t: string) => t === "\\end";
    for (;;) {
      const tr = this.el("mtr");
      for (;;) {
        const cell = this.parseRow((t) => t === "&" || t === "\\\\" || isEnd(t));
        tr.append(this.el("mtd", cell));
        this.skipSpace();
        if (this.src.startsWith("&", this.i)) this.i++;
        else break;
      }
      table.append(tr);
      this.skipSpace();
      if (this.src.startsWith("\\\\", this.i)) {
        this.i += 2;
        continue;
      }
      break;
    }
    if (this.src.startsWith("\\end", this.i)) {
      this.i += 4;
      this.rawGroup();
    }
    if (env.startsWith("align") || env === "aligned" || env === "eqnarray") table.setAttribute("columnalign", "right left");
    if (env === "cases") table.setAttribute("columnalign", "left left");
    const fences: Record<string, [string, string]> = {
      pmatrix: ["(", ")"], bmatrix: ["[", "]"], Bmatrix: ["{", "}"], vmatrix: ["|", "|"], Vmatrix: ["‖", "‖"], cases: ["{", ""],
    };
    const f = fences[env];
    return f ? this.el("mrow", this.el("mo", f[0]), table, this.el("mo", f[1])) : table;
  }
}

/** The <math> element of one formula, or null when it cannot be parsed. */
export function texToMathML(tex: string, display: boolean): Element | null {
  try {
    const p = new Parser(tex.replace(/\\begin\{(equation|displaymath)\*?\}|\\end\{(equation|displaymath)\*?\}/g, ""), display);
    const row = p.parseRow(() => false);
    const math = document.createElementNS(NS, "math");
    if (display) math.setAttribute("display", "block");
    math.append(row);
    math.querySelectorAll("[data-limits]").forEach((e) => e.removeAttribute("data-limits"));
    return math;
  } catch {
    return null;
  }
}

const MATH = /\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\]|\\\(([\s\S]+?)\\\)|\$([^$\n]+?)\$|(\\begin\{[a-zA-Z*]+\}[\s\S]+?\\end\{[a-zA-Z*]+\})/g;

/** Text with formulas (`$…$`, `$$…$$`, `\[…\]`, `\(…\)`, `\begin{…}…\end{…}`) as MathML,
 *  the rest as text, appended to `parent`. */
export function appendLatex(parent: HTMLElement, text: string): void {
  let last = 0;
  MATH.lastIndex = 0;
  let found = false;
  for (let m = MATH.exec(text); m; m = MATH.exec(text)) {
    found = true;
    parent.append(text.slice(last, m.index));
    const display = m[1] !== undefined || m[2] !== undefined || m[5] !== undefined;
    const src = m[1] ?? m[2] ?? m[3] ?? m[4] ?? m[5] ?? "";
    parent.append(mathOrSource(src, display));
    last = m.index + m[0].length;
  }
  if (!found && text.trim()) {
    parent.append(mathOrSource(text, true));
    return;
  }
  parent.append(text.slice(last));
}

function mathOrSource(src: string, display: boolean): Node {
  const m = texToMathML(src, display);
  if (m) return m;
  const code = document.createElement("code");
  code.textContent = src;
  return code;
}

/** Markdown's formulas swapped for placeholders before Markdown is rendered, and the
 *  MathML (as markup) that replaces each afterwards. */
export function extractMath(md: string): { text: string; math: string[] } {
  const math: string[] = [];
  const text = md.replace(MATH, (all, d1, d2, i1, i2, env) => {
    const display = d1 !== undefined || d2 !== undefined || env !== undefined;
    const m = texToMathML(d1 ?? d2 ?? i1 ?? i2 ?? env ?? "", display);
    if (!m) return all;
    math.push(m.outerHTML);
    return `KMCPMATH${math.length - 1}X`;
  });
  return { text, math };
}
