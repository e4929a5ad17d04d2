package workload

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/holdfast-dev/holdfast/internal/apijson"
)

// The readers in this file walk the parts of a review's JSON that decisions read from
// jsontext's tokens, so that reading a workload allocates for what it keeps, not for
// every string and slice on the way. They read from a decoder over a complete []byte (a
// review's body): the values they return are slices of it.

// members reads the JSON object at dec's position, calling member with each name
// (unquoted) while dec is at the name's value; member must read or skip the value. null
// reads as an object without members.
func members(dec *jsontext.Decoder, member func(name []byte) error) error {
	if done, err := open(dec, '{'); done || err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := member(unquote(name)); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// elements reads the JSON array at dec's position, calling element while dec is at each
// element; element must read or skip it. null reads as an empty array.
func elements(dec *jsontext.Decoder, element func() error) error {
	if done, err := open(dec, '['); done || err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if err := element(); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// open reads the opening token of an object or array (kind), or a null (done).
func open(dec *jsontext.Decoder, kind jsontext.Kind) (done bool, err error) {
	switch k := dec.PeekKind(); k {
	case 'n', kind:
		tok, err := dec.ReadToken()
		return err != nil || tok.Kind() == 'n', err
	case 0:
		_, err := dec.ReadToken() // the syntax error
		return true, err
	default:
		return true, kindError(dec, k, kind)
	}
}

// stringValue reads a JSON string (or null, as empty) unquoted.
func stringValue(dec *jsontext.Decoder) ([]byte, error) {
	switch k := dec.PeekKind(); k {
	case '"', 'n':
		v, err := dec.ReadValue()
		if err != nil || k == 'n' {
			return nil, err
		}
		return unquote(v), nil
	default:
		if _, err := dec.ReadValue(); err != nil {
			return nil, err
		}
		return nil, kindError(dec, k, '"')
	}
}

func kindError(dec *jsontext.Decoder, got, want jsontext.Kind) error {
	return fmt.Errorf("%s: want a JSON %s, got %s", dec.StackPointer(), kindName(want), kindName(got))
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	}
	return k.String()
}

// unquote returns a JSON string's contents: a slice of it unless it has escapes or
// invalid UTF-8, which are decoded (invalid UTF-8 replaced, as the decoder allows it).
func unquote(v jsontext.Value) []byte {
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return v[1 : len(v)-1]
	}
	b, _ := jsontext.AppendUnquote(nil, v) // the decoder has checked the syntax
	return b
}

// rawJSON is a JSON value kept as a slice of the input.
type rawJSON []byte

// UnmarshalJSONFrom implements json.UnmarshalerFrom (encoding/json/v2).
func (r *rawJSON) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	*r = rawJSON(v)
	return err
}

var errNotStrings = errors.New("not a JSON array of strings")

// flag reads flag from a JSON array of strings, null or nothing (a command or args the
// object does not have) as FlagValue reads it from one of them: the value, a slice of r
// unless the element has escapes or invalid UTF-8 and is decoded alone as encoding/json/v2
// does (see apijson.Unmarshal), its index, and whether it was found.
func (r rawJSON) flag(flag string) (value []byte, at int, found bool, err error) {
	if len(r) == 0 || string(r) == "null" {
		return nil, 0, false, nil
	}
	var decodeErr error
	i, follows := 0, false
	err = r.eachString(func(from, to int, plain bool) {
		a := r[from+1 : to-1]
		if !plain {
			var s string
			if e := apijson.Unmarshal(r[from:to], &s); e != nil {
				decodeErr = e
			}
			a = []byte(s)
		}
		if follows { // "--flag v"
			value, at, found = a, i, true
		}
		if len(a) > len(flag) && a[len(flag)] == '=' && string(a[:len(flag)]) == flag { // "--flag=v"
			value, at, found = a[len(flag)+1:], i, true
		}
		follows = string(a) == flag
		i++
	})
	if err == nil {
		err = decodeErr
	}
	return value, at, found, err
}

// eachString calls f with the offsets of each quoted element of the array, and whether it
// reads as it is (no escapes, valid UTF-8).
func (r rawJSON) eachString(f func(from, to int, plain bool)) error {
	i := skipSpace(r, 0)
	if i >= len(r) || r[i] != '[' {
		return errNotStrings
	}
	i = skipSpace(r, i+1)
	if i < len(r) && r[i] == ']' {
		return nil
	}
	for i < len(r) {
		if r[i] != '"' {
			return errNotStrings
		}
		j, plain := i+1, true
		for ; j < len(r) && r[j] != '"'; j++ {
			if r[j] == '\\' {
				plain = false
				j++
			} else if r[j] >= utf8.RuneSelf {
				plain = false // checked, and if need be replaced, by the decoder
			}
		}
		if j >= len(r) {
			return errNotStrings
		}
		f(i, j+1, plain)
		i = skipSpace(r, j+1)
		if i >= len(r) {
			break
		}
		switch r[i] {
		case ']':
			return nil
		case ',':
			i = skipSpace(r, i+1)
		default:
			return errNotStrings
		}
	}
	return errNotStrings
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
