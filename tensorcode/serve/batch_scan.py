"""The batch reader's scan (see ``serve.batch_reader``), as plain Python.

The numba backend compiles this file's text as a generated module (cached like a plan),
``skip`` and ``number`` as helpers compiled into ``scan``; it imports nothing, so the
text is the whole program. Bytes are compared by value: 32 space, 9 tab, 10 and 13 line
breaks, 34 ``"``, 44 ``,``, 45 ``-``, 46 ``.``, 48-57 digits, 58 ``:``, 69/101 ``E``/``e``,
43 ``+``, 91/93 brackets, 92 backslash, 123/125 braces.
"""


def skip(text, i, end):
    while i < end:
        c = text[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return i
        i += 1
    return i

def number(text, i, end, out, at, powers):
    """Parse one JSON number at ``i`` into ``out[at]``; the index after it, or -1."""
    negative = False
    if i < end and text[i] == 45:  # '-'
        negative = True
        i += 1
    if i >= end:
        return -1
    mantissa = 0
    digits = 0  # significant digits read into the mantissa
    exponent = 0
    integer = True
    c = text[i]
    if c == 48:  # '0': no digit may follow
        i += 1
    elif 49 <= c <= 57:
        while i < end and 48 <= text[i] <= 57:
            digits += 1
            if digits > 17:
                return -1  # more significant digits than the fast path holds
            mantissa = mantissa * 10 + (text[i] - 48)
            i += 1
    else:
        return -1
    if i < end and text[i] == 46:  # '.'
        integer = False
        i += 1
        if i >= end or not 48 <= text[i] <= 57:
            return -1
        while i < end and 48 <= text[i] <= 57:
            if mantissa != 0 or text[i] != 48:
                digits += 1
                if digits > 17:
                    return -1
            mantissa = mantissa * 10 + (text[i] - 48)
            exponent -= 1
            i += 1
    if i < end and (text[i] == 101 or text[i] == 69):  # 'e' or 'E'
        integer = False
        i += 1
        sign = 1
        if i < end and (text[i] == 43 or text[i] == 45):
            if text[i] == 45:
                sign = -1
            i += 1
        if i >= end or not 48 <= text[i] <= 57:
            return -1
        written = 0
        while i < end and 48 <= text[i] <= 57:
            if written < 100000:
                written = written * 10 + (text[i] - 48)
            i += 1
        exponent += sign * written
    if i < end and (text[i] == 46 or text[i] == 101 or text[i] == 69
                    or 48 <= text[i] <= 57):
        return -1  # '01', '1.2.3' and the like: not JSON
    if mantissa == 0:
        exponent = 0  # zero whatever the exponent
    elif mantissa > 9007199254740992 or exponent > 22 or exponent < -22:
        return -1  # not exact in one operation: the general path reads it
    value = float(mantissa)
    if exponent > 0:
        value = value * powers[exponent]
    elif exponent < 0:
        value = value / powers[-exponent]
    if negative and not (integer and mantissa == 0):
        value = -value
    out[at] = value
    return i

def scan(text, names, name_starts, offsets, dims, dim_starts, out, width, powers,
         remaining):
    """The number of cases read into ``out`` (flat, ``width`` numbers a case), or
    -1 to give up."""
    end = text.shape[0]
    inputs = name_starts.shape[0] - 1
    capacity = out.shape[0] // width
    i = skip(text, 0, end)
    if i >= end or text[i] != 91:  # '['
        return -1
    i = skip(text, i + 1, end)
    count = 0
    while True:
        if count >= capacity or i >= end or text[i] != 123:  # '{'
            return -1
        row = count * width
        seen = 0
        i += 1
        for member in range(inputs):
            i = skip(text, i, end)
            if i >= end or text[i] != 34:  # '"'
                return -1
            i += 1
            start = i
            while i < end and text[i] != 34:
                if text[i] == 92 or text[i] < 32:  # a backslash or a control byte
                    return -1
                i += 1
            if i >= end:
                return -1
            length = i - start
            i += 1
            k = -1
            for candidate in range(inputs):
                a, b = name_starts[candidate], name_starts[candidate + 1]
                if b - a == length:
                    same = True
                    for j in range(length):
                        if names[a + j] != text[start + j]:
                            same = False
                            break
                    if same:
                        k = candidate
                        break
            if k < 0 or (seen >> k) & 1:
                return -1
            seen |= 1 << k
            i = skip(text, i, end)
            if i >= end or text[i] != 58:  # ':'
                return -1
            i = skip(text, i + 1, end)
            at = row + offsets[k]
            first, last = dim_starts[k], dim_starts[k + 1]
            ndim = last - first
            if ndim == 0:
                i = number(text, i, end, out, at, powers)
                if i < 0:
                    return -1
            elif ndim == 1:  # the common case: one flat list
                if i >= end or text[i] != 91:
                    return -1
                i += 1
                size = dims[first]
                for j in range(size):
                    i = skip(text, i, end)
                    i = number(text, i, end, out, at + j, powers)
                    if i < 0:
                        return -1
                    i = skip(text, i, end)
                    if i >= end or text[i] != (44 if j < size - 1 else 93):
                        return -1
                    i += 1
            else:
                if i >= end or text[i] != 91:
                    return -1
                i += 1
                level = 0
                remaining[0] = dims[first]
                while True:
                    i = skip(text, i, end)
                    if level < ndim - 1:  # an element of this level is a list
                        if i >= end or text[i] != 91:
                            return -1
                        i += 1
                        level += 1
                        remaining[level] = dims[first + level]
                        continue
                    i = number(text, i, end, out, at, powers)
                    if i < 0:
                        return -1
                    at += 1
                    closed = False
                    while True:  # after an element of ``level``
                        remaining[level] -= 1
                        i = skip(text, i, end)
                        if i >= end:
                            return -1
                        if remaining[level] > 0:
                            if text[i] != 44:  # ','
                                return -1
                            i += 1
                            break
                        if text[i] != 93:  # ']'
                            return -1
                        i += 1
                        if level == 0:
                            closed = True
                            break
                        level -= 1
                    if closed:
                        break
            i = skip(text, i, end)
            if i >= end:
                return -1
            if member < inputs - 1:
                if text[i] != 44:
                    return -1
                i += 1
            elif text[i] != 125:  # '}'
                return -1
        count += 1
        i = skip(text, i + 1, end)
        if i >= end:
            return -1
        if text[i] == 44:
            i = skip(text, i + 1, end)
            continue
        if text[i] != 93:
            return -1
        i = skip(text, i + 1, end)
        return count if i == end else -1
