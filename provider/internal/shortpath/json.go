package shortpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// valueFromJSON is tftypes.ValueFromJSONWithOpts(data, typ, unmarshalOpts.ValueFromJSONOpts) for
// a stored state in the form Terraform writes it, in one pass over data: tftypes starts a new
// JSON decoder for every value, on a copy of its bytes, which was most of UpgradeResourceState's
// CPU. ok is false for anything it does not read exactly as tftypes would, without judging
// whether tftypes would accept it: values in another JSON type than their own (tftypes reads
// a number or a bool as a string, "1" as true, ...), dynamic and tuple types, objects with
// optional attributes, text after the value, and JSON that is not valid. The caller then asks
// tftypes. TestValueFromJSON and FuzzValueFromJSON hold it to tftypes' answers.
func valueFromJSON(data []byte, typ tftypes.Type) (v tftypes.Value, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, ok = decodeValue(dec, typ)
	if !ok {
		return tftypes.Value{}, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return tftypes.Value{}, false
	}
	return v, true
}

// decodeValue reads the next value of dec as a typ, as tftypes' jsonUnmarshal does.
func decodeValue(dec *json.Decoder, typ tftypes.Type) (tftypes.Value, bool) {
	tok, err := dec.Token()
	if err != nil {
		return tftypes.Value{}, false
	}
	if tok == nil {
		return tftypes.NewValue(typ, nil), true
	}
	switch typ := typ.(type) {
	case tftypes.List:
		if vals, ok := decodeElements(dec, tok, typ.ElementType); ok {
			return tftypes.NewValue(tftypes.List{ElementType: typ.ElementType}, vals), true
		}
	case tftypes.Set:
		if vals, ok := decodeElements(dec, tok, typ.ElementType); ok {
			return tftypes.NewValue(tftypes.Set{ElementType: typ.ElementType}, vals), true
		}
	case tftypes.Map:
		if typ.ElementType.Is(tftypes.DynamicPseudoType) {
			return tftypes.Value{}, false
		}
		if vals, ok := decodeMembers(dec, tok, func(string) (tftypes.Type, bool) { return typ.ElementType, true }); ok {
			return tftypes.NewValue(tftypes.Map{ElementType: typ.ElementType}, vals), true
		}
	case tftypes.Object:
		if len(typ.OptionalAttributes) > 0 {
			return tftypes.Value{}, false
		}
		vals, ok := decodeMembers(dec, tok, func(name string) (tftypes.Type, bool) {
			t, ok := typ.AttributeTypes[name]
			return t, ok
		})
		if !ok {
			return tftypes.Value{}, false
		}
		// Attributes the JSON leaves out are null; those it has that the type does not were
		// dropped (IgnoreUndefinedAttributes).
		for name, t := range typ.AttributeTypes {
			if _, ok := vals[name]; !ok {
				vals[name] = tftypes.NewValue(t, nil)
			}
		}
		return tftypes.NewValue(tftypes.Object{AttributeTypes: typ.AttributeTypes}, vals), true
	default:
		switch {
		case typ.Is(tftypes.String):
			if s, ok := tok.(string); ok {
				return tftypes.NewValue(tftypes.String, s), true
			}
		case typ.Is(tftypes.Number):
			if n, ok := tok.(json.Number); ok {
				f, _, err := big.ParseFloat(string(n), 10, 512, big.ToNearestEven)
				if err == nil {
					return tftypes.NewValue(typ, f), true
				}
			}
		case typ.Is(tftypes.Bool):
			if b, ok := tok.(bool); ok {
				return tftypes.NewValue(tftypes.Bool, b), true
			}
		}
	}
	return tftypes.Value{}, false
}

// decodeElements reads the elements of an array whose opening token was tok.
func decodeElements(dec *json.Decoder, tok json.Token, elem tftypes.Type) ([]tftypes.Value, bool) {
	if tok != json.Delim('[') || elem.Is(tftypes.DynamicPseudoType) {
		return nil, false
	}
	vals := []tftypes.Value{}
	for dec.More() {
		v, ok := decodeValue(dec, elem)
		if !ok {
			return nil, false
		}
		vals = append(vals, v)
	}
	end, err := dec.Token()
	return vals, err == nil && end == json.Delim(']')
}

// decodeMembers reads the members of an object whose opening token was tok: each member typeOf
// knows, as its type (a repeated name: the last one, every one read); the others skipped.
func decodeMembers(dec *json.Decoder, tok json.Token, typeOf func(string) (tftypes.Type, bool)) (map[string]tftypes.Value, bool) {
	if tok != json.Delim('{') {
		return nil, false
	}
	vals := map[string]tftypes.Value{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, ok := key.(string)
		if !ok {
			return nil, false
		}
		t, ok := typeOf(name)
		if !ok {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, false
			}
			continue
		}
		v, ok := decodeValue(dec, t)
		if !ok {
			return nil, false
		}
		vals[name] = v
	}
	end, err := dec.Token()
	return vals, err == nil && end == json.Delim('}')
}
