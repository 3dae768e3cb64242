package web

import (
	"strconv"
)

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
func itoa(n int64) string       { return strconv.FormatInt(n, 10) }
