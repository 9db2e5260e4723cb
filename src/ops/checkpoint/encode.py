# Encodes a Python namespace for a checkpoint (see checkpoint.rs): `run(ns, max_bytes,
# max_nodes, max_depth)` returns hex-encoded JSON {"variables", "saved", "skipped"}. Types
# are checked exactly (`type(v) is int`), so no user code runs: no `__repr__`, `__eq__`,
# `__hash__` or `__iter__` of a subclass. Runs in a private dict, by the helper protocol.
import json, base64


class Skip(Exception):
    pass


HIDDEN = {'In', 'Out', 'exit', 'quit', 'get_ipython'}


def tname(v):
    t = type(v)
    try:
        m = type.__getattribute__(t, '__module__')
        q = type.__getattribute__(t, '__qualname__')
    except Exception:
        return 'object'
    if type(m) is not str or type(q) is not str:
        return 'object'
    return q if m == 'builtins' else m + '.' + q


def why(v):
    n = tname(v)
    if n == 'module':
        return 'a module: import it again after restoring'
    if n in ('function', 'builtin_function_or_method', 'method'):
        return 'a %s: code is not saved (run its definition again)' % n
    if type(v) is type:
        return 'a class: code is not saved (run its definition again)'
    return 'a %s, which is not JSON-safe data' % n


def spend(st, n):
    st[2] += n
    if st[2] > st[5]:
        raise Skip('larger than the %d bytes left in the checkpoint' % max(st[5], 0))


def enc(v, st, depth):
    t = type(v)
    st[0] += 1
    if st[0] > st[1]:
        raise Skip('more than %d values' % st[1])
    if v is None:
        return ['none', None]
    if t is bool:
        return ['bool', v]
    if t is int:
        try:
            s = int.__repr__(v)
        except ValueError:
            raise Skip('an int with too many digits')
        spend(st, len(s) + 10)
        return ['int', s]
    if t is float:
        spend(st, 30)
        return ['float', float.__repr__(v)]
    if t is complex:
        spend(st, 60)
        return ['complex', [float.__repr__(v.real), float.__repr__(v.imag)]]
    if t is str:
        spend(st, len(v) + 10)
        return ['str', v]
    if t is bytes or t is bytearray:
        spend(st, len(v) * 4 // 3 + 16)
        return [t.__name__, base64.b64encode(v).decode('ascii')]
    if t is list or t is tuple or t is set or t is frozenset or t is dict:
        if depth >= st[4]:
            raise Skip('nested deeper than %d levels' % st[4])
        i = id(v)
        if i in st[3]:
            raise Skip('it contains itself')
        st[3].add(i)
        spend(st, 12)
        try:
            if t is dict:
                body = [[enc(k, st, depth + 1), enc(x, st, depth + 1)] for k, x in dict.items(v)]
            else:
                body = [enc(x, st, depth + 1) for x in v]
        finally:
            st[3].discard(i)
        return [t.__name__, body]
    raise Skip(why(v) if depth == 0 else 'it holds ' + why(v))


def run(ns, max_bytes, max_nodes, max_depth):
    saved, skipped, out, left = [], [], {}, max_bytes
    for name in sorted(k for k in list(ns) if type(k) is str):
        if name.startswith('_') or name in HIDDEN:
            continue
        v = ns[name]
        try:
            e = enc(v, [0, max_nodes, 0, set(), max_depth, left], 0)
            size = len(json.dumps(e, ensure_ascii=False).encode('utf-8')) + len(name) + 8
        except Skip as s:
            skipped.append({'name': name, 'reason': str(s)})
            continue
        except UnicodeEncodeError:
            skipped.append({'name': name, 'reason': 'it holds a str with lone surrogates, which UTF-8 cannot hold'})
            continue
        except RecursionError:
            skipped.append({'name': name, 'reason': 'nested too deeply'})
            continue
        if size > left:
            skipped.append({'name': name, 'reason': 'larger than the %d bytes left in the checkpoint' % left})
            continue
        left -= size
        out[name] = e
        saved.append(name)
    return json.dumps({'variables': out, 'saved': saved, 'skipped': skipped}, ensure_ascii=False).encode('utf-8').hex()
