// Package apijson decodes JSON as leniently as the API machinery's decoder does, with
// encoding/json/v2's implementation (github.com/go-json-experiment/json). The review
// codec and the lean workload reader both decode with it, so that a request reads the
// same whichever of them reads it.
package apijson

import (
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// lenient is built once: encoding/json/v2 caches its decoders per set of options.
var lenient = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// Options are the options Unmarshal decodes with: duplicate names are allowed (the last
// wins) and invalid UTF-8 is accepted. Names match case-sensitively and unknown names are
// ignored, as in the API machinery.
func Options() jsonv2.Options { return lenient }

// Unmarshal decodes data into v with Options.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, lenient)
}

// UnmarshalDecode decodes the next value of dec into v with Options.
func UnmarshalDecode(dec *jsontext.Decoder, v any) error {
	return jsonv2.UnmarshalDecode(dec, v, lenient)
}
