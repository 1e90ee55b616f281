#!/usr/bin/env node
// TypeScript/JavaScript oracle: `node oracle.js TYPESCRIPT_MODULE_DIR ROOT` prints the definitions
// and certainly-resolved calls of the .ts/.tsx/.js/... files under ROOT as one JSON object
// (eval/realcode/README.md). It uses the TypeScript compiler's own parser and binder, nothing of
// graphmem's tree-sitter extractors.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node oracle.js TYPESCRIPT_MODULE_DIR ROOT\n');
  process.exit(2);
}
const ts = require(path.resolve(process.argv[2]));
const ROOT = path.resolve(process.argv[3]);

const SOURCE_EXT = /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/;
const DECLARATION_FILE = /\.d\.(ts|mts|cts)$|\.d\.[^/]*\.ts$/;
const TS_EXT = /\.(ts|tsx|mts|cts)$/;
// Build output directories, left out when the package also ships the sources they come from.
const BUNDLE_DIRS = new Set(['dist', 'build']);
const TEST_DIRS = new Set(['test', 'tests', '__tests__', '__test__']);

// --- files -----------------------------------------------------------------------------------

function listFiles() {
  const found = [];
  const walk = (dir, rel) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
      const relPath = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path.join(dir, entry.name), relPath);
      else if (entry.isFile() && SOURCE_EXT.test(entry.name) && !DECLARATION_FILE.test(entry.name)
               && !/\.min\.[cm]?js$/.test(entry.name)) found.push(relPath);
    }
  };
  walk(ROOT, '');
  const outside = found.filter((p) => !p.split('/').slice(0, -1).some((d) => BUNDLE_DIRS.has(d)));
  const files = outside.length ? outside : found;
  return files.sort();
}

function isTestPath(rel) {
  const parts = rel.split('/');
  const name = parts[parts.length - 1];
  return parts.slice(0, -1).some((d) => TEST_DIRS.has(d)) || /\.(test|spec)\.[^.]+$/.test(name);
}

// --- definitions -----------------------------------------------------------------------------

/** The text of a declaration's name when graphmem-style keys can use it, else null. */
function plainName(name) {
  if (!name) return null;
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  return null; // computed, string and numeric names have no dotted key
}

function isFunctionValue(node) {
  return node && (ts.isArrowFunction(node) || ts.isFunctionExpression(node));
}

/** Index of `node` among the statements or members holding it, to recognise adjacent overloads. */
function siblingIndex(node) {
  const parent = node.parent;
  const list = parent.statements || parent.members;
  return list ? list.indexOf(node) : -1;
}

/** The node whose text is the whole declaration (a lone `const f = ...` spans its statement). */
function extentNode(node) {
  if (ts.isVariableDeclaration(node)) {
    const list = node.parent;
    if (ts.isVariableDeclarationList(list) && list.declarations.length === 1
        && ts.isVariableStatement(list.parent)) return list.parent;
  }
  return node;
}

/** Where the declaration's own text starts once decorators are passed. */
function signatureStart(sf, node) {
  const mods = ts.canHaveModifiers(node) ? ts.getModifiers(node) : undefined;
  const decorators = ts.canHaveDecorators(node) ? ts.getDecorators(node) : undefined;
  if (mods && mods.length) return mods[0].getStart(sf);
  if (decorators && decorators.length) {
    const last = decorators[decorators.length - 1];
    const scanner = ts.createScanner(ts.ScriptTarget.Latest, true, sf.languageVariant, sf.text, undefined, last.end);
    scanner.scan();
    return scanner.getTokenStart ? scanner.getTokenStart() : scanner.getTokenPos();
  }
  return node.getStart(sf);
}

function signatureOf(sf, node, extent) {
  const start = extent === node ? signatureStart(sf, node) : extent.getStart(sf);
  let line = sf.text.slice(start, extent.end).split(/\r?\n/, 1)[0].trim();
  line = line.replace(/\s*[{;]\s*$/, '').replace(/\s*=>\s*$/, '').trimEnd();
  return line;
}

function commentText(comment) {
  if (comment === undefined) return '';
  if (typeof comment === 'string') return comment;
  return comment.map((part) => {
    if (ts.isJSDocLink(part) || ts.isJSDocLinkCode(part) || ts.isJSDocLinkPlain(part)) {
      const label = (part.text || '').replace(/^\s*\|\s*/, '').trim();
      return label || (part.name ? part.name.getText() : '');
    }
    return part.text;
  }).join('');
}

/** First paragraph of the JSDoc nearest the declaration, tags left out, whitespace collapsed. */
function docOf(node) {
  const docs = ts.getJSDocCommentsAndTags(node).filter((d) => ts.isJSDoc(d));
  if (!docs.length) return '';
  const text = commentText(docs[docs.length - 1].comment).replace(
    /\{@link(?:code|plain)?\s+([^}|\s]+)(?:[\s|]+([^}]*))?\}/g, (_, target, label) => (label && label.trim()) || target);
  const paragraph = text.trim().split(/\n\s*\n/, 1)[0];
  return paragraph.split('\n').map((l) => l.trim()).filter(Boolean).join(' ');
}

function lineOf(sf, pos) {
  return sf.getLineAndCharacterOfPosition(pos).line + 1;
}

function sha1(text) {
  return crypto.createHash('sha1').update(text, 'utf8').digest('hex');
}

/**
 * Collects one file's definitions. Scopes are the dotted nesting of named definitions; anonymous
 * functions and classes are transparent, as in graphmem's keys.
 */
function collectDefinitions(sf, rel, test, defs, nodeKeys) {
  const byQual = new Map();

  const add = (node, name, kind, scope) => {
    const qualname = scope.qual ? `${scope.qual}.${name}` : name;
    const container = kind === 'method' ? scope.qual : null;
    const key = `${rel}::${qualname}`;
    nodeKeys.set(node, { key, kind, topLevel: !scope.qual && !scope.inNamespace });
    const extent = extentNode(node);
    const existing = byQual.get(qualname);
    if (existing) {
      // Overloads (and get/set pairs) are adjacent siblings: the definition spans them all.
      const last = existing.lastNode;
      if (last.parent === node.parent && siblingIndex(node) === siblingIndex(last) + 1) {
        existing.lastNode = node;
        existing.end = extent.end;
        if (!existing.def.doc) existing.def.doc = docOf(node);
      }
      return qualname;
    }
    const start = extent.getStart(sf);
    const def = {
      path: rel, qualname, name, kind, container,
      start_line: 0, end_line: 0, doc: docOf(node), signature: signatureOf(sf, node, extent),
      body_sha: '', test,
    };
    byQual.set(qualname, { def, start, end: extent.end, lastNode: node });
    return qualname;
  };

  const visit = (node, scope) => {
    if (ts.isFunctionDeclaration(node) && plainName(node.name)) {
      const qual = add(node, node.name.text, 'function', scope);
      return ts.forEachChild(node, (c) => visit(c, { qual, inClass: false, inNamespace: scope.inNamespace }));
    }
    if ((ts.isClassDeclaration(node) || ts.isClassExpression(node)) && plainName(node.name)) {
      const qual = add(node, node.name.text, 'class', scope);
      return ts.forEachChild(node, (c) => visit(c, { qual, inClass: true, inNamespace: scope.inNamespace }));
    }
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      // An anonymous class gives its members no key of their own.
      return ts.forEachChild(node, (c) => visitAnonymousMember(c, scope));
    }
    if (scope.inClass && (ts.isMethodDeclaration(node) || ts.isGetAccessorDeclaration(node)
                          || ts.isSetAccessorDeclaration(node) || ts.isConstructorDeclaration(node))) {
      const name = ts.isConstructorDeclaration(node) ? 'constructor' : plainName(node.name);
      if (name === null) return ts.forEachChild(node, (c) => visit(c, { ...scope, inClass: false }));
      const qual = add(node, name, 'method', scope);
      return ts.forEachChild(node, (c) => visit(c, { qual, inClass: false, inNamespace: scope.inNamespace }));
    }
    if (ts.isInterfaceDeclaration(node)) {
      add(node, node.name.text, 'interface', scope);
      return undefined; // members are signatures, not definitions
    }
    if (ts.isEnumDeclaration(node)) {
      add(node, node.name.text, 'enum', scope);
      return undefined;
    }
    if (ts.isTypeAliasDeclaration(node)) {
      add(node, node.name.text, 'type', scope);
      return undefined;
    }
    if (ts.isModuleDeclaration(node) && ts.isIdentifier(node.name)) {
      // A namespace names what it holds but is not itself one of the kinds listed.
      const qual = scope.qual ? `${scope.qual}.${node.name.text}` : node.name.text;
      return ts.forEachChild(node, (c) => visit(c, { qual, inClass: false, inNamespace: true }));
    }
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && isFunctionValue(node.initializer)) {
      const qual = add(node, node.name.text, 'function', scope);
      return ts.forEachChild(node, (c) => visit(c, { qual, inClass: false, inNamespace: scope.inNamespace }));
    }
    // Anything else (object literals, class fields, anonymous callbacks) is transparent.
    return ts.forEachChild(node, (c) => visit(c, { ...scope, inClass: false }));
  };

  const visitAnonymousMember = (node, scope) => {
    if (ts.isClassElement(node) || ts.isHeritageClause(node)) {
      return ts.forEachChild(node, (c) => visit(c, { ...scope, inClass: false }));
    }
    return visit(node, { ...scope, inClass: false });
  };

  visit(sf, { qual: '', inClass: false, inNamespace: false });
  for (const { def, start, end } of byQual.values()) {
    def.start_line = lineOf(sf, start);
    def.end_line = lineOf(sf, end);
    def.body_sha = sha1(sf.text.slice(start, end));
    defs.push(def);
  }
}

// --- calls -----------------------------------------------------------------------------------

const MAX_CHASE = 8;

function isRelativeSpecifier(spec) {
  return spec === '.' || spec === '..' || spec.startsWith('./') || spec.startsWith('../');
}

function requireSpecifier(expr) {
  // `require('./x')` or `require('./x').f`
  while (expr && ts.isPropertyAccessExpression(expr)) expr = expr.expression;
  if (expr && ts.isCallExpression(expr) && ts.isIdentifier(expr.expression) && expr.expression.text === 'require'
      && expr.arguments.length === 1 && ts.isStringLiteralLike(expr.arguments[0])) return expr.arguments[0].text;
  return null;
}

/** The module an import alias comes from, or null when it is not an import of a module. */
function aliasSpecifier(decl) {
  let node = decl;
  while (node && !ts.isSourceFile(node)) {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      return node.moduleSpecifier && ts.isStringLiteralLike(node.moduleSpecifier) ? node.moduleSpecifier.text : null;
    }
    if (ts.isImportEqualsDeclaration(node)) {
      const ref = node.moduleReference;
      return ts.isExternalModuleReference(ref) && ts.isStringLiteralLike(ref.expression) ? ref.expression.text : null;
    }
    if (ts.isVariableDeclaration(node)) return requireSpecifier(node.initializer);
    node = node.parent;
  }
  return null;
}

function isConstVariable(decl) {
  return (ts.getCombinedNodeFlags(decl) & ts.NodeFlags.Const) !== 0;
}

function isValueDeclaration(decl) {
  return ts.isFunctionDeclaration(decl) || ts.isVariableDeclaration(decl) || ts.isMethodDeclaration(decl)
    || ts.isClassDeclaration(decl) || ts.isPropertyAssignment(decl) || ts.isShorthandPropertyAssignment(decl)
    || ts.isExportAssignment(decl) || ts.isBinaryExpression(decl) || ts.isPropertyAccessExpression(decl)
    || ts.isBindingElement(decl) || ts.isParameter(decl) || ts.isEnumDeclaration(decl)
    || ts.isModuleDeclaration(decl) || ts.isImportSpecifier(decl);
}

/**
 * The definition keys a symbol's value declarations stand for, following CommonJS export
 * shapes (`module.exports = f`, `module.exports = { f }`, `exports.f = f`) to the function.
 */
function definitionKeys(checker, symbol, nodeKeys, depth) {
  const keys = new Set();
  let unknown = false;
  const values = (symbol.declarations || []).filter(isValueDeclaration);
  if (!values.length) return { keys, unknown: true };
  for (const decl of values) {
    const known = nodeKeys.get(decl);
    if (known) {
      if (ts.isVariableDeclaration(decl) && !isConstVariable(decl)) unknown = true; // may be reassigned
      if (known.kind !== 'function') unknown = true; // calling a class or type is no call of ours
      keys.add(known.key);
      continue;
    }
    let next = null;
    if (ts.isShorthandPropertyAssignment(decl)) next = checker.getShorthandAssignmentValueSymbol(decl);
    else if (ts.isPropertyAssignment(decl) && ts.isIdentifier(decl.initializer)) {
      next = checker.getSymbolAtLocation(decl.initializer);
    } else if (ts.isExportAssignment(decl) && ts.isIdentifier(decl.expression)) {
      next = checker.getSymbolAtLocation(decl.expression);
    } else if (ts.isBinaryExpression(decl) && ts.isIdentifier(decl.right)) {
      next = checker.getSymbolAtLocation(decl.right);
    } else if (ts.isPropertyAccessExpression(decl) && ts.isBinaryExpression(decl.parent)
               && decl.parent.left === decl && ts.isIdentifier(decl.parent.right)) {
      next = checker.getSymbolAtLocation(decl.parent.right);
    }
    if (next && depth < MAX_CHASE) {
      if (next.flags & ts.SymbolFlags.Alias) { unknown = true; continue; }
      const inner = definitionKeys(checker, next, nodeKeys, depth + 1);
      inner.keys.forEach((k) => keys.add(k));
      unknown = unknown || inner.unknown;
    } else {
      unknown = true;
    }
  }
  return { keys, unknown };
}

function resolveIdentifierCall(checker, id, sf, nodeKeys) {
  const symbol = checker.getSymbolAtLocation(id);
  if (!symbol) return null;
  let target = symbol;
  if (symbol.flags & ts.SymbolFlags.Alias) {
    const decl = symbol.declarations && symbol.declarations[0];
    const spec = decl ? aliasSpecifier(decl) : null;
    if (spec === null || !isRelativeSpecifier(spec)) return null;
    target = checker.getAliasedSymbol(symbol);
    if (!target || target === checker.getUnknownSymbol?.()) return null;
  } else {
    // Without an import, only a top-level definition of the same file is certain (scripts share
    // one global scope, so a same-named function elsewhere would make it ambiguous).
    const decls = symbol.declarations || [];
    if (!decls.length || decls.some((d) => d.getSourceFile() !== sf)) return null;
    if (decls.some((d) => { const k = nodeKeys.get(d); return k && !k.topLevel; })) return null;
  }
  const { keys, unknown } = definitionKeys(checker, target, nodeKeys, 0);
  if (unknown || keys.size !== 1) return null;
  return [...keys][0];
}

/** The class whose instance (or constructor, in static code) `this` is at `node`, or null. */
function thisClass(node) {
  let current = node.parent;
  while (current) {
    if (ts.isArrowFunction(current)) { current = current.parent; continue; }
    // A class member (method, accessor, field initializer, static block) binds `this` to its
    // class; any other function, or an object literal's method, binds it to something else.
    if (ts.isClassElement(current)) return current.parent && ts.isClassLike(current.parent) ? current.parent : null;
    if (ts.isFunctionLike(current) || ts.isSourceFile(current) || ts.isModuleDeclaration(current)
        || ts.isClassLike(current)) return null;
    current = current.parent;
  }
  return null;
}

function resolveThisCall(checker, access, nodeKeys) {
  const cls = thisClass(access);
  if (!cls) return null;
  const symbol = checker.getSymbolAtLocation(access.name);
  if (!symbol || !symbol.declarations || !symbol.declarations.length) return null;
  const keys = new Set();
  for (const decl of symbol.declarations) {
    // A getter's result, a field holding a function, or a method of another class is not certain.
    if (!ts.isMethodDeclaration(decl) || decl.parent !== cls) return null;
    const known = nodeKeys.get(decl);
    if (!known) return null;
    keys.add(known.key);
  }
  return keys.size === 1 ? [...keys][0] : null;
}

function enclosingDefinition(node, nodeKeys) {
  let current = node.parent;
  while (current) {
    const known = nodeKeys.get(current);
    if (known) return known.key;
    current = current.parent;
  }
  return null;
}

function collectCalls(checker, sf, nodeKeys, calls) {
  const visit = (node) => {
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      let target = null;
      if (ts.isIdentifier(callee)) target = resolveIdentifierCall(checker, callee, sf, nodeKeys);
      else if (ts.isPropertyAccessExpression(callee) && callee.expression.kind === ts.SyntaxKind.ThisKeyword) {
        target = resolveThisCall(checker, callee, nodeKeys);
      }
      if (target) {
        const caller = enclosingDefinition(node, nodeKeys);
        if (caller) calls.add(`${caller}\u0000${target}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

// --- main ------------------------------------------------------------------------------------

function main() {
  const files = listFiles();
  const options = {
    allowJs: true, checkJs: false, noEmit: true, noLib: true, types: [], skipLibCheck: true,
    module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler,
    target: ts.ScriptTarget.Latest, jsx: ts.JsxEmit.Preserve, maxNodeModuleJsDepth: 0,
    allowArbitraryExtensions: false, resolveJsonModule: false,
  };
  const host = ts.createCompilerHost(options, true);
  const program = ts.createProgram(files.map((f) => path.join(ROOT, f)), options, host);
  const checker = program.getTypeChecker();

  const defs = [];
  const nodeKeys = new Map();
  const sources = [];
  for (const rel of files) {
    const sf = program.getSourceFile(path.join(ROOT, rel));
    if (!sf) continue;
    sources.push(sf);
    collectDefinitions(sf, rel, isTestPath(rel), defs, nodeKeys);
  }
  const pairs = new Set();
  for (const sf of sources) collectCalls(checker, sf, nodeKeys, pairs);

  const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  defs.sort((a, b) => cmp(a.path, b.path) || a.start_line - b.start_line || cmp(a.qualname, b.qualname));
  const calls = [...pairs].sort(cmp).map((p) => {
    const [caller, callee] = p.split('\u0000');
    return { caller, callee };
  });
  const language = files.some((f) => TS_EXT.test(f)) ? 'typescript' : 'javascript';
  process.stdout.write(`${JSON.stringify({ language, definitions: defs, calls }, null, 1)}\n`);
}

main();
