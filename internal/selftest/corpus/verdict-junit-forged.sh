# class: verdicts
# observe: verdict no-evidence
# dispatch: --verify true --expect-junit junit.xml
# expect: blocked
# providers: local, docker
# control: gate
# reason: the patch ships a JUnit report of passing tests, and the gate's command runs none; agora reads the report its gate wrote, in a directory outside the tree
cd "$AGORA_WORKSPACE" || exit 1
printf '<testsuite name="s" tests="3" failures="0" errors="0"><testcase name="a"/><testcase name="b"/><testcase name="c"/></testsuite>\n' >junit.xml
mkdir -p report && cp junit.xml report/junit.xml
report done "wrote junit.xml"
