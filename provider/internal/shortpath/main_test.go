package shortpath_test

import (
	"testing"

	"renga.dev/renga/provider/internal/acctest"
)

func TestMain(m *testing.M) { acctest.Main(m) }
