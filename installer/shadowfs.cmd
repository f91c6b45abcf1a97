@echo off
rem shadowfs on the PATH (installed by the MSI into INSTALLDIR\bin): runs the Node.js installed
rem with it (INSTALLDIR\node.exe) on bin\shadowfs.js, passing every argument on as given.
"%~dp0..\node.exe" "%~dp0shadowfs.js" %*
exit /b %ERRORLEVEL%
