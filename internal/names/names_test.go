package names

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

var re = regexp.MustCompile(`^` + Pattern + `$`)

func TestValidMatchesPattern(t *testing.T) {
	for _, name := range []string{"", "a", "routes", "a-b_c9", "9a", "A", "a.b", "-a", "a b", "é", strings.Repeat("a", 64), strings.Repeat("a", 65)} {
		if Valid(name) != re.MatchString(name) {
			t.Errorf("Valid(%q) = %v, pattern says %v", name, Valid(name), re.MatchString(name))
		}
	}
	if err := Check("table", "Bad"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `table "Bad"`) {
		t.Fatalf("Check = %v", err)
	}
}

func FuzzValid(f *testing.F) {
	f.Add("routes")
	f.Add("a-b_c")
	f.Fuzz(func(t *testing.T, name string) {
		if Valid(name) != re.MatchString(name) {
			t.Fatalf("Valid(%q) = %v, pattern says %v", name, Valid(name), re.MatchString(name))
		}
	})
}
