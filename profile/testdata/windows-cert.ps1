# Windows IKEv2 VPN rw to gw.example.net for o'brien@example.net, from the gateway's config (ipsecd profile windows).
# Run in an elevated PowerShell: the gateway's CA goes into the machine's root store.
$ErrorActionPreference = 'Stop'
# The CA that issued the gateway's certificate: CN=Profile Test CA,O=ipsecd
$ca = Join-Path $env:TEMP 'ipsecd-rw-ca.cer'
Set-Content -Path $ca -Value @'
CA-PEM
'@
Import-Certificate -FilePath $ca -CertStoreLocation Cert:\LocalMachine\Root | Out-Null
Add-VpnConnection -Name 'rw' -ServerAddress 'gw.example.net' -TunnelType Ikev2 -EncryptionLevel Required -AuthenticationMethod MachineCertificate -SplitTunneling -Force
Add-VpnConnectionRoute -ConnectionName 'rw' -DestinationPrefix 198.51.100.0/24
Set-VpnConnectionIPsecConfiguration -ConnectionName 'rw' -EncryptionMethod GCMAES256 -IntegrityCheckMethod SHA384 -DHGroup ECP384 -CipherTransformConstants GCMAES256 -AuthenticationTransformConstants GCMAES256 -PfsGroup ECP384 -Force
