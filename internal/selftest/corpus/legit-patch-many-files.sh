# class: legitimate
# observe: patch selftest-many/
# expect: allowed
# control: patch
# reason: five hundred new files in one dispatch are all in its patch
mkdir -p selftest-many
i=0
while [ $i -lt 500 ]; do echo $i >selftest-many/f$i.txt; i=$((i + 1)); done
report done "wrote 500 files under selftest-many/"
