package plan

import (
	"reflect"
	"slices"
	"testing"
)

// TestTemplateDoc: a fan-out template has exactly a task's fields but id and fan_out, so a
// field added to tasks is added to templates too.
func TestTemplateDoc(t *testing.T) {
	fields := func(typ reflect.Type, skip ...string) []string {
		var out []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !slices.Contains(skip, f.Name) {
				out = append(out, f.Name+" "+f.Type.String()+" "+string(f.Tag))
			}
		}
		slices.Sort(out)
		return out
	}
	// learn is a person's key for a task of its own: a fan-out's items are not learn tasks.
	task, tmpl := fields(reflect.TypeFor[taskDoc](), "ID", "FanOut", "Learn"), fields(reflect.TypeFor[templateDoc]())
	if !slices.Equal(task, tmpl) {
		t.Errorf("templateDoc fields\n%q\ndiffer from taskDoc's but id, fan_out and learn\n%q", tmpl, task)
	}
	// task() copies every field: fill each with a non-zero value and compare.
	var d templateDoc
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Interface:
			f.Set(reflect.ValueOf(map[string]any{}))
		default:
			if f.Kind() == reflect.Pointer {
				f.Set(reflect.New(f.Type().Elem()))
			} else if f.Kind() == reflect.Slice {
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			} else if f.Kind() == reflect.Map {
				f.Set(reflect.MakeMap(f.Type()))
			}
		}
	}
	td := d.task()
	tv := reflect.ValueOf(td)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if tv.FieldByName(name).IsZero() {
			t.Errorf("templateDoc.task() drops %s", name)
		}
	}
}
