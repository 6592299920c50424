package build

import (
	"encoding"
	"encoding/csv"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// normalizeName folds case and drops '-', '_' and '.' so that a flag name
// and a Go field name can be compared.
func normalizeName(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "", ".", "").Replace(s))
}

// fieldForFlag finds the exported field of struct v that receives flag
// name: the one tagged `flag:"name"`, else the one whose normalized name
// equals the normalized flag name.
func fieldForFlag(v reflect.Value, name string) (reflect.Value, error) {
	t := v.Type()
	want := normalizeName(name)
	match := -1
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if tag, ok := f.Tag.Lookup("flag"); ok {
			if tag == name {
				return v.Field(i), nil
			}
			continue
		}
		if match < 0 && normalizeName(f.Name) == want {
			match = i
		}
	}
	if match < 0 {
		return reflect.Value{}, fmt.Errorf("no exported field of %s is named like it or tagged `flag:%q`", t, name)
	}
	return v.Field(match), nil
}

// setField stores the value of the parsed flag f in field.
func setField(field reflect.Value, f *pflag.Flag) error {
	var err error
	switch sv, isSlice := f.Value.(pflag.SliceValue); {
	case isSlice && field.Kind() == reflect.Slice:
		elems := sv.GetSlice()
		out := reflect.MakeSlice(field.Type(), len(elems), len(elems))
		for i, e := range elems {
			if err = parseScalar(out.Index(i), e); err != nil {
				break
			}
		}
		if err == nil {
			field.Set(out)
		}
	case field.Kind() == reflect.Map:
		err = parseStringMap(field, f.Value.String())
	default:
		err = parseScalar(field, f.Value.String())
	}
	if err != nil {
		return fmt.Errorf("%w: --%s=%q: %v", ErrInvalidFlagValue, f.Name, f.Value.String(), err)
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// parseScalar parses s into v by v's type.
func parseScalar(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		v.SetInt(int64(d))
		return err
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 0, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 0, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetFloat(n)
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

// parseStringMap parses pflag's "[k=v,k2=v2]" rendering of a
// string-to-string flag into a map[string]string field.
func parseStringMap(v reflect.Value, s string) error {
	if v.Type() != reflect.TypeFor[map[string]string]() {
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	m := map[string]string{}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if s != "" {
		records, err := csv.NewReader(strings.NewReader(s)).Read()
		if err != nil {
			return err
		}
		for _, r := range records {
			k, val, ok := strings.Cut(r, "=")
			if !ok {
				return fmt.Errorf("%q is not key=value", r)
			}
			m[k] = val
		}
	}
	v.Set(reflect.ValueOf(m))
	return nil
}

// copyFlagValue sets dst (bound to a config field) from the parsed flag src
// of the same name.
func copyFlagValue(dst, src *pflag.Flag) error {
	var err error
	if ss, ok := src.Value.(pflag.SliceValue); ok {
		if ds, ok := dst.Value.(pflag.SliceValue); ok {
			err = ds.Replace(ss.GetSlice())
		} else {
			err = fmt.Errorf("flag types differ: %s and %s", dst.Value.Type(), src.Value.Type())
		}
	} else {
		s := src.Value.String()
		if strings.HasPrefix(src.Value.Type(), "stringTo") {
			s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		}
		err = dst.Value.Set(s)
	}
	if err != nil {
		return fmt.Errorf("%w: --%s=%q: %v", ErrInvalidFlagValue, src.Name, src.Value.String(), err)
	}
	return nil
}
