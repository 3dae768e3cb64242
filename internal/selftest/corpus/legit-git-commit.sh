# class: legitimate
# expect: allowed
# control: sandbox
# reason: the agent's own git work in its workspace must work
echo change >>README.md
attempt git -c user.name=selftest -c user.email=selftest@example.com commit -q -am selftest
