# Windows IKEv2 VPN rw to gw.example.net for o'brien@example.net, from the gateway's config (ipsecd profile windows).
# Run in an elevated PowerShell: the gateway's CA goes into the machine's root store.
$ErrorActionPreference = 'Stop'
# The CA that issued the gateway's certificate: CN=Profile Test CA,O=ipsecd
$ca = Join-Path $env:TEMP 'ipsecd-rw-ca.cer'
Set-Content -Path $ca -Value @'
CA-PEM
'@
Import-Certificate -FilePath $ca -CertStoreLocation Cert:\LocalMachine\Root | Out-Null
Add-VpnConnection -Name 'rw' -ServerAddress 'gw.example.net' -TunnelType Ikev2 -EncryptionLevel Required -AuthenticationMethod Eap -RememberCredential -Force
Set-VpnConnectionIPsecConfiguration -ConnectionName 'rw' -EncryptionMethod AES128 -IntegrityCheckMethod SHA256 -DHGroup ECP256 -CipherTransformConstants AES128 -AuthenticationTransformConstants SHA256128 -PfsGroup None -Force
