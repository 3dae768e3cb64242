package dispatch_test

// pid1Role is the environment variable TestParentSupervisor_PidOne (process_pid1_internal_test.go)
// re-executes the test binary with: "init" (pid 1 of a new pid namespace) or "child".
const pid1Role = "AGORA_TEST_PID1_ROLE"
