<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de">
<context>
    <name>QObject</name>
    <message>
        <location filename="../../app/tandem_main.cpp" line="+259"/>
        <location line="+60"/>
        <source>Tandem</source>
        <translation>Tandem</translation>
    </message>
    <message>
        <location line="-59"/>
        <source>The settings in %1 cannot be used: %2
Tandem starts with the defaults; fix or delete the file.</source>
        <translation>Die Einstellungen in %1 können nicht verwendet werden: %2
Tandem startet mit den Standardwerten; korrigieren oder löschen Sie die Datei.</translation>
    </message>
    <message>
        <location line="+76"/>
        <source>Tandem cannot start: %1</source>
        <translation>Tandem kann nicht starten: %1</translation>
    </message>
</context>
<context>
    <name>main</name>
    <message>
        <location line="-150"/>
        <source>Donate this computer&apos;s spare GPU time to the training of an open language model.</source>
        <translation>Spenden Sie die freie GPU-Zeit dieses Computers für das Training eines offenen Sprachmodells.</translation>
    </message>
    <message>
        <location line="-28"/>
        <source>Pre-fill the coordinator URL (also $TANDEM_COORDINATOR).</source>
        <translation>Die URL des Koordinators vorausfüllen (auch $TANDEM_COORDINATOR).</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Pre-fill the coordinator&apos;s key pin, sha256//... (also $TANDEM_PIN).</source>
        <translation>Den Schlüssel-Pin des Koordinators vorausfüllen, sha256//... (auch $TANDEM_PIN).</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Trust the coordinator through this CA file.</source>
        <translation>Dem Koordinator über diese CA-Datei vertrauen.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Settings, identity, ledger and work (default ~/.local/share/tandem; also $TANDEM_DATA_DIR).</source>
        <translation>Einstellungen, Identität, Journal und Arbeit (Standard ~/.local/share/tandem; auch $TANDEM_DATA_DIR).</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Start in the tray without showing the window (used at login).</source>
        <translation>Im Infobereich starten, ohne das Fenster zu zeigen (für die Anmeldung).</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>With --coordinator: join without the first-run wizard, with default limits.</source>
        <translation>Mit --coordinator: ohne den Einrichtungsassistenten teilnehmen, mit Standardgrenzen.</translation>
    </message>
</context>
<context>
    <name>tandem::app</name>
    <message>
        <location filename="../../app/desktop_services.cpp" line="+35"/>
        <source>no NVIDIA driver found (libcuda.so.1 is not installed)</source>
        <translation>kein NVIDIA-Treiber gefunden (libcuda.so.1 ist nicht installiert)</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>%1 has compute capability %2.%3; Tandem needs 7.5 or newer</source>
        <translation>%1 hat die Compute Capability %2.%3; Tandem braucht 7.5 oder neuer</translation>
    </message>
</context>
<context>
    <name>tandem::app::DesktopServices</name>
    <message>
        <location line="+27"/>
        <source>%1, compute capability %2.%3</source>
        <translation>%1, Compute Capability %2.%3</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>, driver %1</source>
        <translation>, Treiber %1</translation>
    </message>
    <message>
        <location line="+3"/>
        <location line="+8"/>
        <source>this build of Tandem has no CUDA backend</source>
        <translation>diese Version von Tandem hat kein CUDA-Backend</translation>
    </message>
    <message>
        <location line="-6"/>
        <source>compute capability %1.%2; Tandem needs 7.5 or newer</source>
        <translation>Compute Capability %1.%2; Tandem braucht 7.5 oder neuer</translation>
    </message>
    <message>
        <location line="+14"/>
        <source>%1 threads, %2 memory</source>
        <translation>%1 Threads, %2 Arbeitsspeicher</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>CPU</source>
        <translation>CPU</translation>
    </message>
    <message>
        <location line="+137"/>
        <source>the coordinator does not say how large a work unit is</source>
        <translation>der Koordinator sagt nicht, wie groß eine Arbeitseinheit ist</translation>
    </message>
</context>
<context>
    <name>tandem::ui</name>
    <message>
        <location filename="../state_view.cpp" line="+84"/>
        <source>Not connected</source>
        <translation>Nicht verbunden</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Choose a coordinator in Settings to start contributing.</source>
        <translation>Wählen Sie in den Einstellungen einen Koordinator, um mitzumachen.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Working: asking for work</source>
        <translation>Arbeitet: fragt nach Arbeit</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Working: registering</source>
        <translation>Arbeitet: meldet sich an</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Working: downloading a work unit</source>
        <translation>Arbeitet: lädt eine Arbeitseinheit herunter</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Working: training</source>
        <translation>Arbeitet: trainiert</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Working: uploading results</source>
        <translation>Arbeitet: lädt Ergebnisse hoch</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Paused</source>
        <translation>Pausiert</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Snoozed until %1</source>
        <translation>Ruht bis %1</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Snoozed</source>
        <translation>Ruht</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Waiting</source>
        <translation>Wartet</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Waiting: no work available right now</source>
        <translation>Wartet: gerade keine Arbeit verfügbar</translation>
    </message>
    <message>
        <location filename="../engine_words.cpp" line="+31"/>
        <source>today&apos;s upload cap is reached (%1 of %2; resets %3)</source>
        <translation>die Upload-Grenze für heute ist erreicht (%1 von %2; wird %3 zurückgesetzt)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>the next upload would pass today&apos;s cap (%1 of %2 used; resets %3)</source>
        <translation>der nächste Upload würde die Grenze für heute überschreiten (%1 von %2 verbraucht; wird %3 zurückgesetzt)</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>today&apos;s download cap is reached (%1 of %2; resets %3)</source>
        <translation>die Download-Grenze für heute ist erreicht (%1 von %2; wird %3 zurückgesetzt)</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>the next download would pass today&apos;s cap (%1 of %2 used; resets %3)</source>
        <translation>der nächste Download würde die Grenze für heute überschreiten (%1 von %2 verbraucht; wird %3 zurückgesetzt)</translation>
    </message>
    <message>
        <location line="+38"/>
        <source>at %1</source>
        <translation>um %1</translation>
    </message>
    <message>
        <location line="+2"/>
        <location line="+52"/>
        <source>at midnight</source>
        <translation>um Mitternacht</translation>
    </message>
    <message>
        <location line="-50"/>
        <source>tomorrow at %1</source>
        <translation>morgen um %1</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>yesterday at %1</source>
        <translation>gestern um %1</translation>
    </message>
    <message>
        <location line="+2"/>
        <location line="+1"/>
        <source>on %1 at %2</source>
        <translation>am %1 um %2</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>midnight</source>
        <translation>Mitternacht</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>tomorrow %1</source>
        <translation>morgen %1</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>on battery</source>
        <translation>läuft auf Akku</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>“Only at these times” is on, but no time is chosen</source>
        <translation>„Nur zu diesen Zeiten“ ist eingeschaltet, aber keine Zeit ist gewählt</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>outside the chosen times (resumes %1)</source>
        <translation>außerhalb der gewählten Zeiten (geht %1 weiter)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>outside the chosen times</source>
        <translation>außerhalb der gewählten Zeiten</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>the computer is in use (resumes after %1 min idle)</source>
        <translation>der Computer wird benutzt (geht nach %1 min Leerlauf weiter)</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Tandem cannot tell whether the computer is in use</source>
        <translation>Tandem kann nicht feststellen, ob der Computer benutzt wird</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>the device is cooling down (%1, resumes at %2)</source>
        <translation>das Gerät kühlt ab (%1, geht bei %2 weiter)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>the device is too hot (%1, limit %2)</source>
        <translation>das Gerät ist zu heiß (%1, Grenze %2)</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>Waiting: %1</source>
        <translation>Wartet: %1</translation>
    </message>
    <message>
        <location line="+5"/>
        <location filename="../state_view.cpp" line="-84"/>
        <source>soon</source>
        <translation>bald</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>register with the training server</source>
        <translation>beim Trainingsserver anmelden</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>ask for a work unit</source>
        <translation>eine Arbeitseinheit anfordern</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>train work unit %1</source>
        <translation>Arbeitseinheit %1 trainieren</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>send work unit %1 after step %2</source>
        <translation>Arbeitseinheit %1 nach Schritt %2 senden</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>stop once the results are sent</source>
        <translation>beenden, sobald die Ergebnisse gesendet sind</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>the next work unit once the results are sent</source>
        <translation>die nächste Arbeitseinheit, sobald die Ergebnisse gesendet sind</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>resume to continue</source>
        <translation>zum Weitermachen „Fortsetzen“ wählen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>resumes %1</source>
        <translation>geht %1 weiter</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>check again %1</source>
        <translation>prüft erneut %1</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>check again when that changes</source>
        <translation>prüft erneut, sobald sich das ändert</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>try again %1</source>
        <translation>versucht es %1 erneut</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>sending work unit %1 waits: %2</source>
        <translation>das Senden von Arbeitseinheit %1 wartet: %2</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>sending work unit %1 waits</source>
        <translation>das Senden von Arbeitseinheit %1 wartet</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>send work unit %1 again %2</source>
        <translation>Arbeitseinheit %1 %2 erneut senden</translation>
    </message>
    <message>
        <location filename="../state_view.cpp" line="+12"/>
        <source>Needs attention: the server&apos;s key does not match the pin in Settings</source>
        <translation>Handlungsbedarf: Der Schlüssel des Servers passt nicht zum festgelegten Schlüssel in den Einstellungen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Needs attention: the server&apos;s certificate is not trusted</source>
        <translation>Handlungsbedarf: Dem Zertifikat des Servers wird nicht vertraut</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Needs attention: the training server refused this computer</source>
        <translation>Handlungsbedarf: Der Trainingsserver hat diesen Computer abgewiesen</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Needs attention: this Tandem and the server&apos;s do not match; update Tandem</source>
        <translation>Handlungsbedarf: Diese Tandem-Version passt nicht zu der des Servers; aktualisieren Sie Tandem</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Needs attention: the disk with Tandem&apos;s data is full</source>
        <translation>Handlungsbedarf: Der Datenträger mit Tandems Daten ist voll</translation>
    </message>
    <message>
        <location line="-23"/>
        <source>Can&apos;t reach the training server; retrying %1</source>
        <translation>Trainingsserver nicht erreichbar; neuer Versuch %1</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>The training server is busy; retrying %1</source>
        <translation>Der Trainingsserver ist ausgelastet; neuer Versuch %1</translation>
    </message>
    <message>
        <location line="+28"/>
        <source>Something went wrong; retrying %1</source>
        <translation>Etwas ist schiefgegangen; neuer Versuch %1</translation>
    </message>
    <message>
        <location line="+54"/>
        <source>Stopped</source>
        <translation>Angehalten</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>Work unit %1: step %2 of %3</source>
        <translation>Arbeitseinheit %1: Schritt %2 von %3</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Work unit %1: %2 of %3</source>
        <translation>Arbeitseinheit %1: %2 von %3</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>uploading result %1 (%2%)</source>
        <translation>lädt Ergebnis %1 hoch (%2 %)</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>pauses after this unit</source>
        <translation>pausiert nach dieser Einheit</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>next: %1</source>
        <translation>als Nächstes: %1</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Tandem: %1</source>
        <translation>Tandem: %1</translation>
    </message>
    <message>
        <location line="+77"/>
        <source>Assigned</source>
        <translation>Zugeteilt</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Downloading</source>
        <translation>Wird heruntergeladen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Training</source>
        <translation>Wird trainiert</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Trained, waiting to upload</source>
        <translation>Trainiert, wartet auf das Hochladen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Uploading</source>
        <translation>Wird hochgeladen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Uploaded, waiting for its receipt</source>
        <translation>Hochgeladen, wartet auf die Quittung</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Accepted</source>
        <translation>Angenommen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Refused by the coordinator</source>
        <translation>Vom Koordinator abgelehnt</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Failed here (nothing sent)</source>
        <translation>Hier fehlgeschlagen (nichts gesendet)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Abandoned</source>
        <translation>Aufgegeben</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>This computer was paused, asleep or offline for longer than the training server keeps a work unit, before enough of it was trained to send.</source>
        <translation>Dieser Computer war länger pausiert, im Ruhezustand oder offline, als der Trainingsserver eine Arbeitseinheit aufbewahrt, bevor genug davon trainiert war, um es zu senden.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>The training moved on while this work unit waited, so its result would no longer count.</source>
        <translation>Das Training ist weitergegangen, während diese Arbeitseinheit wartete; ihr Ergebnis würde nicht mehr zählen.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>The training server saw no progress on this work unit for too long.</source>
        <translation>Der Trainingsserver hat zu lange keinen Fortschritt dieser Arbeitseinheit gesehen.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Given back to the training server: this computer could not continue it.</source>
        <translation>An den Trainingsserver zurückgegeben: Dieser Computer konnte sie nicht fortsetzen.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>The training server no longer kept this work unit for this computer.</source>
        <translation>Der Trainingsserver hat diese Arbeitseinheit nicht mehr für diesen Computer bereitgehalten.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Its result had already been counted.</source>
        <translation>Ihr Ergebnis war bereits gezählt.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>The training server gave this work unit up (the log says why).</source>
        <translation>Der Trainingsserver hat diese Arbeitseinheit aufgegeben (der Grund steht im Protokoll).</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>under 1 s</source>
        <translation>unter 1 s</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>%1 s</source>
        <translation>%1 s</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>%1 min</source>
        <translation>%1 min</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>%1 h %2 min</source>
        <translation>%1 h %2 min</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>%1 M</source>
        <translation>%1 Mio.</translation>
    </message>
</context>
<context>
    <name>tandem::ui::AppActions</name>
    <message>
        <location filename="../app_actions.cpp" line="+17"/>
        <location line="+51"/>
        <source>&amp;Pause</source>
        <translation>&amp;Pause</translation>
    </message>
    <message>
        <location line="-49"/>
        <source>Snooze for &amp;1 hour</source>
        <translation>&amp;1 Stunde ruhen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Snooze for &amp;3 hours</source>
        <translation>&amp;3 Stunden ruhen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Snooze until &amp;tomorrow</source>
        <translation>Bis &amp;morgen ruhen</translation>
    </message>
    <message>
        <location line="+1"/>
        <location line="+53"/>
        <source>&amp;Finish current unit, then pause</source>
        <translation>Aktuelle Einheit &amp;beenden, dann pausieren</translation>
    </message>
    <message>
        <location line="-51"/>
        <source>&amp;Open Tandem</source>
        <translation>Tandem ö&amp;ffnen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;Settings…</source>
        <translation>&amp;Einstellungen …</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Quit</source>
        <translation>B&amp;eenden</translation>
    </message>
    <message>
        <location line="+40"/>
        <source>&amp;Resume</source>
        <translation>&amp;Fortsetzen</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>&amp;Pause now</source>
        <translation>Jetzt &amp;pausieren</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>&amp;Finish this unit first (about %1)</source>
        <translation>Erst diese Einheit &amp;fertigstellen (etwa %1)</translation>
    </message>
</context>
<context>
    <name>tandem::ui::ContributionsPage</name>
    <message>
        <location filename="../contributions_page.cpp" line="+38"/>
        <source>Totals</source>
        <translation>Summen</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Work units:</source>
        <translation>Arbeitseinheiten:</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Tokens trained:</source>
        <translation>Trainierte Tokens:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>GPU-hours:</source>
        <translation>GPU-Stunden:</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Compute hours:</source>
        <translation>Rechenstunden:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Credit:</source>
        <translation>Guthaben:</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Data sent:</source>
        <translation>Gesendete Daten:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Data received:</source>
        <translation>Empfangene Daten:</translation>
    </message>
    <message>
        <location line="+17"/>
        <source>Credit: one for each token your accepted work units trained. The leaderboard ranks donors by it; it is not money.</source>
        <translation>Guthaben: eines für jedes Token, das Ihre angenommenen Arbeitseinheiten trainiert haben. Die Rangliste ordnet die Spender danach; es ist kein Geld.</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>Leaderboard</source>
        <translation>Bestenliste</translation>
    </message>
    <message>
        <location line="+20"/>
        <source>Per day, last %1 days:</source>
        <translation>Pro Tag, letzte %1 Tage:</translation>
    </message>
    <message>
        <location line="+3"/>
        <location line="+14"/>
        <location line="+16"/>
        <source>Tokens</source>
        <translation>Tokens</translation>
    </message>
    <message>
        <location line="-29"/>
        <source>GPU-hours</source>
        <translation>GPU-Stunden</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Compute hours (GPU or CPU)</source>
        <translation>Rechenstunden (GPU oder CPU)</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>What the chart shows</source>
        <translation>Was das Diagramm zeigt</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>Contributions per day</source>
        <translation>Beiträge pro Tag</translation>
    </message>
    <message>
        <location line="+18"/>
        <source>Work units</source>
        <translation>Arbeitseinheiten</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Work unit</source>
        <translation>Arbeitseinheit</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Trained</source>
        <translation>Trainiert</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>State</source>
        <translation>Zustand</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Loss (first → last)</source>
        <translation>Loss (erster → letzter)</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Device</source>
        <translation>Gerät</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Receipt, or why it did not count</source>
        <translation>Quittung, oder warum sie nicht zählte</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>&amp;Receipt…</source>
        <translation>&amp;Quittung…</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>The chosen unit&apos;s receipt: its signature, checked against the coordinator&apos;s key</source>
        <translation>Die Quittung der gewählten Einheit: ihre Signatur, geprüft mit dem Schlüssel des Koordinators</translation>
    </message>
    <message>
        <location line="+35"/>
        <source>The ledger cannot be read: %1</source>
        <translation>Das Journal kann nicht gelesen werden: %1</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>No contributions yet: the first work unit finishes in about %1.</source>
        <translation>Noch keine Beiträge: Die erste Arbeitseinheit ist in etwa %1 fertig.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>No contributions yet. Tandem trains a work unit as soon as the coordinator hands one out; each one shows up here with its receipt.</source>
        <translation>Noch keine Beiträge. Tandem trainiert eine Arbeitseinheit, sobald der Koordinator eine vergibt; jede erscheint hier mit ihrer Quittung.</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>No contributions yet. Choose a coordinator in Settings to start.</source>
        <translation>Noch keine Beiträge. Wählen Sie in den Einstellungen einen Koordinator, um zu beginnen.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>%L1 trained, %L2 accepted, %L3 waiting for a receipt</source>
        <translation>%L1 trainiert, %L2 angenommen, %L3 warten auf eine Quittung</translation>
    </message>
    <message>
        <location line="+73"/>
        <source>%1 (partial: %2 of %3 steps)</source>
        <translation>%1 (teilweise: %2 von %3 Schritten)</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>round %1, weight %2, credit %3, %4</source>
        <translation>Runde %1, Gewicht %2, Guthaben %3, %4</translation>
    </message>
    <message>
        <location line="+52"/>
        <source>Asking the coordinator for your rank…</source>
        <translation>Der Koordinator wird nach Ihrem Rang gefragt …</translation>
    </message>
    <message>
        <location line="+16"/>
        <source>Your rank is not available right now: the coordinator cannot be reached (%1). Tandem asks again later.</source>
        <translation>Ihr Rang ist gerade nicht verfügbar: Der Koordinator ist nicht erreichbar (%1). Tandem fragt später erneut.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Not ranked yet: Tandem has not registered with this coordinator.</source>
        <translation>Noch kein Rang: Tandem hat sich noch nicht bei diesem Koordinator registriert.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Not ranked yet: the leaderboard counts accepted results.</source>
        <translation>Noch kein Rang: Die Bestenliste zählt angenommene Ergebnisse.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Rank %1 of %2 donors, shown as “anonymous” (choose a public name in Settings)</source>
        <translation>Rang %1 von %2 Spendern, angezeigt als „anonymous“ (einen öffentlichen Namen wählen Sie in den Einstellungen)</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Rank %1 of %2 donors</source>
        <translation>Rang %1 von %2 Spendern</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Team %1: not ranked yet</source>
        <translation>Team %1: noch kein Rang</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Team %1: rank %2 of %3 teams</source>
        <translation>Team %1: Rang %2 von %3 Teams</translation>
    </message>
</context>
<context>
    <name>tandem::ui::CostText</name>
    <message>
        <location filename="../cost_text.cpp" line="+48"/>
        <source>The run&apos;s model size is not known (%1), so the costs cannot be worked out yet. Set limits below if your connection is metered.</source>
        <translation>Die Modellgröße des Laufs ist nicht bekannt (%1), daher lassen sich die Kosten noch nicht berechnen. Legen Sie unten Grenzen fest, wenn Ihre Verbindung nach Volumen abgerechnet wird.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>the coordinator did not answer</source>
        <translation>der Koordinator hat nicht geantwortet</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>The run trains a %1.</source>
        <translation>Der Lauf trainiert ein %1.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Training a unit needs about &lt;b&gt;%1&lt;/b&gt; of memory on a CPU, or %2 of GPU memory and %3 of RAM on a GPU; a device with less is not given work.</source>
        <translation>Das Training einer Einheit braucht etwa &lt;b&gt;%1&lt;/b&gt; Speicher auf einer CPU, oder %2 GPU-Speicher und %3 Arbeitsspeicher auf einer GPU; ein Gerät mit weniger bekommt keine Arbeit.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>This coordinator does not say how it sizes work units (it is older than this app), so the time and data per day cannot be worked out. Each unit downloads at least %1 (the model&apos;s weights) and uploads %2.</source>
        <translation>Dieser Koordinator sagt nicht, wie er Arbeitseinheiten bemisst (er ist älter als diese App), daher lassen sich Zeit und Daten pro Tag nicht berechnen. Jede Einheit lädt mindestens %1 herunter (die Gewichte des Modells) und %2 hoch.</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>Your device&apos;s training speed could not be measured (%1), so the time and data per day cannot be worked out. A unit of the longest kind (%2 training steps) downloads %3 and uploads %4.</source>
        <translation>Die Trainingsgeschwindigkeit Ihres Geräts ließ sich nicht messen (%1), daher lassen sich Zeit und Daten pro Tag nicht berechnen. Eine Einheit der längsten Art (%2 Trainingsschritte) lädt %3 herunter und %4 hoch.</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Your device (%1) trains about %2 tokens a second, so the coordinator will give it work units of %3 training steps, each about &lt;b&gt;%4&lt;/b&gt; of training. Each unit downloads %5 (the model&apos;s weights and its text) and uploads %6.</source>
        <translation>Ihr Gerät (%1) trainiert etwa %2 Tokens pro Sekunde, daher gibt ihm der Koordinator Arbeitseinheiten von %3 Trainingsschritten, jede etwa &lt;b&gt;%4&lt;/b&gt; Training. Jede Einheit lädt %5 herunter (die Gewichte des Modells und seinen Text) und %6 hoch.</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>At your measured speed a result takes &lt;b&gt;%1&lt;/b&gt; to upload, longer than a unit takes to train: your upload sets the pace.</source>
        <translation>Bei Ihrer gemessenen Geschwindigkeit dauert der Upload eines Ergebnisses &lt;b&gt;%1&lt;/b&gt;, länger als das Training einer Einheit: Ihr Upload bestimmt das Tempo.</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>With your connection a unit takes about &lt;b&gt;%1&lt;/b&gt; in all, %2 of it downloading; its upload (%3) runs while the next unit trains.</source>
        <translation>Mit Ihrer Verbindung dauert eine Einheit insgesamt etwa &lt;b&gt;%1&lt;/b&gt;, davon %2 Download; ihr Upload (%3) läuft, während die nächste Einheit trainiert.</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>The connection was not measured, so download and upload times are left out.</source>
        <translation>Die Verbindung wurde nicht gemessen, daher sind Download- und Uploadzeiten nicht eingerechnet.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Working %1 hours a day, that is about %2 units a day: &lt;b&gt;%3 down&lt;/b&gt; and &lt;b&gt;%4 up&lt;/b&gt; per day.</source>
        <translation>Bei %1 Stunden Arbeit am Tag sind das etwa %2 Einheiten pro Tag: &lt;b&gt;%3 herunter&lt;/b&gt; und &lt;b&gt;%4 hoch&lt;/b&gt; pro Tag.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Your daily caps keep it to that; without them it would be %1 units.</source>
        <translation>Ihre Tageslimits begrenzen es darauf; ohne sie wären es %1 Einheiten.</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>measured on the GPU</source>
        <translation>auf der GPU gemessen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>an estimate for %1 CPU threads, not measured</source>
        <translation>eine Schätzung für %1 CPU-Threads, nicht gemessen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>the GPU&apos;s power limit; its sensor gave no reading</source>
        <translation>das Leistungslimit der GPU; ihr Sensor lieferte keinen Wert</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Training draws about %1 W (%2): about &lt;b&gt;%3 kWh a day&lt;/b&gt;</source>
        <translation>Das Training braucht etwa %1 W (%2): etwa &lt;b&gt;%3 kWh am Tag&lt;/b&gt;</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>, which costs about &lt;b&gt;%1&lt;/b&gt; a day at %2 per kWh.</source>
        <translation>, was bei %2 pro kWh etwa &lt;b&gt;%1&lt;/b&gt; am Tag kostet.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>. Enter your electricity price to see what that costs.</source>
        <translation>. Geben Sie Ihren Strompreis ein, um zu sehen, was das kostet.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>not known: the coordinator does not say how it sizes work units</source>
        <translation>nicht bekannt: der Koordinator sagt nicht, wie er Arbeitseinheiten bemisst</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>not known until this device&apos;s speed is measured (after its first work unit)</source>
        <translation>nicht bekannt, bis die Geschwindigkeit dieses Geräts gemessen ist (nach seiner ersten Arbeitseinheit)</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>about %1 work units: %2 down, %3 up</source>
        <translation>etwa %1 Arbeitseinheiten: %2 herunter, %3 hoch</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>, %1 kWh</source>
        <translation>, %1 kWh</translation>
    </message>
    <message>
        <location line="+2"/>
        <source> (%1)</source>
        <translation> (%1)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>, held to that by your daily caps</source>
        <translation>, begrenzt durch Ihre Tageslimits</translation>
    </message>
</context>
<context>
    <name>tandem::ui::DBusIdleSource</name>
    <message>
        <location filename="../idle_dbus.cpp" line="+35"/>
        <source>the answer is not a number</source>
        <translation>die Antwort ist keine Zahl</translation>
    </message>
    <message>
        <location line="+14"/>
        <source>there is no D-Bus session bus to ask the desktop</source>
        <translation>es gibt keinen D-Bus-Sitzungsbus, über den die Arbeitsumgebung gefragt werden kann</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>the desktop offers no idle time on the session bus (neither org.gnome.Mutter.IdleMonitor nor org.freedesktop.ScreenSaver)</source>
        <translation>die Arbeitsumgebung bietet auf dem Sitzungsbus keine Leerlaufzeit an (weder org.gnome.Mutter.IdleMonitor noch org.freedesktop.ScreenSaver)</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>org.freedesktop.ScreenSaver did not tell the idle time (%1)</source>
        <translation>org.freedesktop.ScreenSaver hat die Leerlaufzeit nicht genannt (%1)</translation>
    </message>
</context>
<context>
    <name>tandem::ui::FirstRunWizard</name>
    <message>
        <location filename="../wizard.cpp" line="+50"/>
        <source> GB per day</source>
        <translation> GB pro Tag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>no cap</source>
        <translation>keine Grenze</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>Welcome to Tandem</source>
        <translation>Willkommen bei Tandem</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>Your devices</source>
        <translation>Ihre Geräte</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Tandem trains on a GPU when one can be used, otherwise on the CPU. It only uses what you allow.</source>
        <translation>Tandem trainiert auf einer GPU, wenn eine nutzbar ist, sonst auf der CPU. Es nutzt nur, was Sie erlauben.</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Looking for devices…</source>
        <translation>Sucht nach Geräten …</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Device to train on</source>
        <translation>Gerät für das Training</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;Train on:</source>
        <translation>&amp;Trainieren auf:</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>The training run</source>
        <translation>Der Trainingslauf</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>A coordinator hands out the work of a training run and combines the results. Enter the address you were given.</source>
        <translation>Ein Koordinator verteilt die Arbeit eines Trainingslaufs und führt die Ergebnisse zusammen. Geben Sie die Adresse ein, die Sie erhalten haben.</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>sha256//… (only for a self-signed coordinator)</source>
        <translation>sha256//… (nur für einen Koordinator mit selbst signiertem Zertifikat)</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Coordinator &amp;URL:</source>
        <translation>&amp;URL des Koordinators:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Pinned &amp;key:</source>
        <translation>Festgelegter &amp;Schlüssel:</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>anonymous</source>
        <translation>anonym</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Public display name</source>
        <translation>Öffentlicher Anzeigename</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>no team</source>
        <translation>kein Team</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Team</source>
        <translation>Team</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Public na&amp;me:</source>
        <translation>Öffentlicher Na&amp;me:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;Team:</source>
        <translation>&amp;Team:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Your name and team are shown on the run&apos;s public page and leaderboard; leave them empty to stay anonymous.</source>
        <translation>Name und Team erscheinen auf der öffentlichen Seite des Laufs und in der Bestenliste; lassen Sie sie leer, um anonym zu bleiben.</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>Your connection</source>
        <translation>Ihre Verbindung</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Tandem measures the link to the coordinator (about 12 MB, up to 20 seconds) and how fast your device trains the run&apos;s model (a few seconds), to work out what joining costs.</source>
        <translation>Tandem misst die Verbindung zum Koordinator (etwa 12 MB, bis zu 20 Sekunden) und wie schnell Ihr Gerät das Modell des Laufs trainiert (einige Sekunden), um zu berechnen, was die Teilnahme kostet.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>&amp;Measure again</source>
        <translation>Erneut &amp;messen</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>What it costs, and your limits</source>
        <translation>Was es kostet, und Ihre Grenzen</translation>
    </message>
    <message>
        <location line="+13"/>
        <source> hours per day</source>
        <translation> Stunden pro Tag</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Expected &amp;working time:</source>
        <translation>Erwartete &amp;Arbeitszeit:</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Daily &amp;upload cap:</source>
        <translation>Tägliche &amp;Upload-Grenze:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Daily &amp;download cap:</source>
        <translation>Tägliche &amp;Download-Grenze:</translation>
    </message>
    <message>
        <location line="+6"/>
        <source> per kWh</source>
        <translation> pro kWh</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>not given</source>
        <translation>nicht angegeben</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Electricity price:</source>
        <translation>&amp;Strompreis:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Only when I am not using the computer (idle for 5 min)</source>
        <translation>Nur, wenn ich den Computer nicht benutze (5 min im Leerlauf)</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Pause while on battery</source>
        <translation>Im Akkubetrieb pausieren</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>&amp;Start contributing</source>
        <translation>&amp;Mitmachen</translation>
    </message>
    <message>
        <location line="+15"/>
        <source>CPU</source>
        <translation>CPU</translation>
    </message>
    <message>
        <location line="+26"/>
        <source>usable</source>
        <translation>nutzbar</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>not usable: %1</source>
        <translation>nicht nutzbar: %1</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>No GPU can be used: %1. Tandem will train on the CPU, which is much slower but still helps.</source>
        <translation>Keine GPU ist nutzbar: %1. Tandem trainiert auf der CPU; das ist viel langsamer, hilft aber trotzdem.</translation>
    </message>
    <message>
        <location line="+17"/>
        <source>Enter the coordinator&apos;s address (https://host:port).</source>
        <translation>Geben Sie die Adresse des Koordinators ein (https://host:port).</translation>
    </message>
    <message>
        <location line="+23"/>
        <source>The measurement is not available in this build.</source>
        <translation>Die Messung ist in dieser Version nicht verfügbar.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Measuring the connection to %1…</source>
        <translation>Misst die Verbindung zu %1 …</translation>
    </message>
    <message>
        <location line="+27"/>
        <source>The coordinator&apos;s key does not match the pinned key you entered, so Tandem cannot trust it. Go back and correct the pin (the coordinator prints it at start), or leave it empty for a coordinator with a certificate from a known authority.

%1</source>
        <translation>Der Schlüssel des Koordinators passt nicht zum eingegebenen festgelegten Schlüssel, daher kann Tandem ihm nicht vertrauen. Gehen Sie zurück und korrigieren Sie ihn (der Koordinator gibt ihn beim Start aus), oder lassen Sie das Feld leer bei einem Koordinator mit einem Zertifikat einer bekannten Zertifizierungsstelle.

%1</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>The coordinator&apos;s certificate is not trusted. Go back and enter its pinned key (the coordinator prints it at start).

%1</source>
        <translation>Dem Zertifikat des Koordinators wird nicht vertraut. Gehen Sie zurück und geben Sie seinen festgelegten Schlüssel ein (der Koordinator gibt ihn beim Start aus).

%1</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>The measurement failed: %1

Check the address on the previous page, or continue: Tandem can measure again later from its Network page.</source>
        <translation>Die Messung ist fehlgeschlagen: %1

Prüfen Sie die Adresse auf der vorigen Seite, oder fahren Sie fort: Tandem kann später auf der Seite „Netzwerk“ erneut messen.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Download: %1 Mbit/s
Upload: %2 Mbit/s
Latency: %3 ms</source>
        <translation>Download: %1 Mbit/s
Upload: %2 Mbit/s
Latenz: %3 ms</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Training speed: %1 tokens/s on %2</source>
        <translation>Trainingsgeschwindigkeit: %1 Tokens/s auf %2</translation>
    </message>
</context>
<context>
    <name>tandem::ui::LogPage</name>
    <message>
        <location filename="../log_page.cpp" line="+25"/>
        <source>&amp;Level:</source>
        <translation>&amp;Stufe:</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Everything</source>
        <translation>Alles</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Information and above</source>
        <translation>Informationen und höher</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Warnings and errors</source>
        <translation>Warnungen und Fehler</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Errors only</source>
        <translation>Nur Fehler</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Search:</source>
        <translation>S&amp;uchen:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>text in the message</source>
        <translation>Text in der Meldung</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Copy</source>
        <translation>&amp;Kopieren</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Copy the selected lines, or every line shown (Ctrl+C)</source>
        <translation>Die ausgewählten Zeilen kopieren, oder alle angezeigten (Strg+C)</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>Event log</source>
        <translation>Ereignisprotokoll</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Time</source>
        <translation>Zeit</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Level</source>
        <translation>Stufe</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Message</source>
        <translation>Meldung</translation>
    </message>
    <message>
        <location line="+20"/>
        <location line="+16"/>
        <source>No events yet. Tandem writes what it does here: registrations, work units, uploads, receipts and every problem it meets.</source>
        <translation>Noch keine Ereignisse. Tandem schreibt hier auf, was es tut: Anmeldungen, Arbeitseinheiten, Uploads, Quittungen und jedes Problem, auf das es stößt.</translation>
    </message>
    <message>
        <location line="-6"/>
        <source>The ledger cannot be read: %1</source>
        <translation>Das Journal kann nicht gelesen werden: %1</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>debug</source>
        <translation>Debug</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>info</source>
        <translation>Info</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>warning</source>
        <translation>Warnung</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>error</source>
        <translation>Fehler</translation>
    </message>
</context>
<context>
    <name>tandem::ui::MainWindow</name>
    <message>
        <location filename="../main_window.cpp" line="+30"/>
        <source>Tandem</source>
        <translation>Tandem</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Pages</source>
        <translation>Seiten</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>Overview</source>
        <translation>Übersicht</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Contributions</source>
        <translation>Beiträge</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Performance</source>
        <translation>Leistung</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Training run</source>
        <translation>Trainingslauf</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Network</source>
        <translation>Netzwerk</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Log</source>
        <translation>Protokoll</translation>
    </message>
    <message>
        <location line="+31"/>
        <source>&amp;Tandem</source>
        <translation>&amp;Tandem</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Close Window</source>
        <translation>Fenster &amp;schließen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>&amp;Work</source>
        <translation>&amp;Arbeit</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>&amp;View</source>
        <translation>A&amp;nsicht</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>&amp;Refresh</source>
        <translation>A&amp;ktualisieren</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>&amp;Help</source>
        <translation>&amp;Hilfe</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;About Tandem</source>
        <translation>&amp;Über Tandem</translation>
    </message>
    <message>
        <location line="+119"/>
        <source>%1 – Tandem</source>
        <translation>%1 – Tandem</translation>
    </message>
    <message>
        <location line="+43"/>
        <source>About Tandem</source>
        <translation>Über Tandem</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&lt;h3&gt;Tandem %1&lt;/h3&gt;&lt;p&gt;Donates the spare time of this computer&apos;s GPU (or CPU) to the training of an open language model. It trains DiLoCo work units handed out by a coordinator and sends back compact results.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;Tandem %1&lt;/h3&gt;&lt;p&gt;Spendet die freie Zeit der GPU (oder CPU) dieses Computers für das Training eines offenen Sprachmodells. Es trainiert DiLoCo-Arbeitseinheiten, die ein Koordinator vergibt, und sendet kompakte Ergebnisse zurück.&lt;/p&gt;</translation>
    </message>
</context>
<context>
    <name>tandem::ui::NetworkPage</name>
    <message>
        <location filename="../network_page.cpp" line="+32"/>
        <source>work unit description</source>
        <translation>Beschreibung der Arbeitseinheit</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>model weights</source>
        <translation>Gewichte des Modells</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>training text</source>
        <translation>Trainingstext</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>result</source>
        <translation>Ergebnis</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>%1 of %2 today</source>
        <translation>%1 von %2 heute</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>%1 today (no cap)</source>
        <translation>%1 heute (keine Grenze)</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>Link to the coordinator</source>
        <translation>Verbindung zum Koordinator</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>&amp;Measure again</source>
        <translation>Erneut &amp;messen</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Today against the daily caps</source>
        <translation>Heute im Vergleich zu den Tagesgrenzen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Sent today</source>
        <translation>Heute gesendet</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Received today</source>
        <translation>Heute empfangen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Sent:</source>
        <translation>Gesendet:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Received:</source>
        <translation>Empfangen:</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Data sent and received per day</source>
        <translation>Gesendete und empfangene Daten pro Tag</translation>
    </message>
    <message>
        <location line="-1"/>
        <source>Data per day (MB), last %1 days</source>
        <translation>Daten pro Tag (MB), letzte %1 Tage</translation>
    </message>
    <message>
        <location line="+4"/>
        <location line="+125"/>
        <source>sent</source>
        <translation>gesendet</translation>
    </message>
    <message>
        <location line="-124"/>
        <location line="+124"/>
        <source>received</source>
        <translation>empfangen</translation>
    </message>
    <message>
        <location line="-110"/>
        <source>Transfer log</source>
        <translation>Übertragungsprotokoll</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Started</source>
        <translation>Begonnen</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Direction</source>
        <translation>Richtung</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>What</source>
        <translation>Was</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Size</source>
        <translation>Größe</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Duration</source>
        <translation>Dauer</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Speed</source>
        <translation>Geschwindigkeit</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Result</source>
        <translation>Ergebnis</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>Choose a coordinator in Settings first.</source>
        <translation>Wählen Sie zuerst in den Einstellungen einen Koordinator.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Measuring… (up to 20 s)</source>
        <translation>Misst … (bis zu 20 s)</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>The measurement failed: %1</source>
        <translation>Die Messung ist fehlgeschlagen: %1</translation>
    </message>
    <message>
        <location line="+20"/>
        <source>%1 Mbit/s down, %2 Mbit/s up, %3 ms latency (measured %4)</source>
        <translation>%1 Mbit/s herunter, %2 Mbit/s hoch, %3 ms Latenz (gemessen %4)</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>Not measured yet.</source>
        <translation>Noch nicht gemessen.</translation>
    </message>
    <message>
        <location line="+5"/>
        <location line="+12"/>
        <source>Nothing sent or received yet. Tandem records every transfer here: weights and data it downloads, and the results it uploads.</source>
        <translation>Noch nichts gesendet oder empfangen. Tandem verzeichnet hier jede Übertragung: heruntergeladene Gewichte und Daten sowie hochgeladene Ergebnisse.</translation>
    </message>
    <message>
        <location line="-6"/>
        <source>The ledger cannot be read: %1</source>
        <translation>Das Journal kann nicht gelesen werden: %1</translation>
    </message>
    <message>
        <location line="+51"/>
        <source> (unit %1)</source>
        <translation> (Einheit %1)</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>%1 Mbit/s</source>
        <translation>%1 Mbit/s</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>ok</source>
        <translation>ok</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>failed: %1</source>
        <translation>fehlgeschlagen: %1</translation>
    </message>
</context>
<context>
    <name>tandem::ui::OverviewPage</name>
    <message>
        <location filename="../overview_page.cpp" line="+42"/>
        <source>State icon</source>
        <translation>Zustandssymbol</translation>
    </message>
    <message>
        <location line="+21"/>
        <source>Open Settings…</source>
        <translation>Einstellungen öffnen…</translation>
    </message>
    <message>
        <location line="+21"/>
        <source>Pause now</source>
        <translation>Jetzt pausieren</translation>
    </message>
    <message>
        <location line="+3"/>
        <location line="+115"/>
        <source>Finish this unit first</source>
        <translation>Erst diese Einheit fertigstellen</translation>
    </message>
    <message>
        <location line="-111"/>
        <source>Finish current unit, then pause</source>
        <translation>Aktuelle Einheit beenden, dann pausieren</translation>
    </message>
    <message>
        <location line="+25"/>
        <source>Current work unit</source>
        <translation>Aktuelle Arbeitseinheit</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>Progress of the current work unit</source>
        <translation>Fortschritt der aktuellen Arbeitseinheit</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Work unit:</source>
        <translation>Arbeitseinheit:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Progress:</source>
        <translation>Fortschritt:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Time left:</source>
        <translation>Verbleibende Zeit:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Speed:</source>
        <translation>Geschwindigkeit:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Step loss:</source>
        <translation>Loss des Schritts:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>This computer</source>
        <translation>Dieser Computer</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Device:</source>
        <translation>Gerät:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Last upload:</source>
        <translation>Letzter Upload:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Next:</source>
        <translation>Als Nächstes:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>So far:</source>
        <translation>Bisher:</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>A day costs:</source>
        <translation>Ein Tag kostet:</translation>
    </message>
    <message>
        <location line="+42"/>
        <source>&amp;Resume</source>
        <translation>&amp;Fortsetzen</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>&amp;Pause</source>
        <translation>&amp;Pause</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Resume contributing</source>
        <translation>Beitragen fortsetzen</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Pause contributing</source>
        <translation>Beitragen pausieren</translation>
    </message>
    <message>
        <location line="+15"/>
        <source>Finish this unit first (about %1)</source>
        <translation>Erst diese Einheit fertigstellen (etwa %1)</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Stops at the current step and sends the %1 steps done so far.</source>
        <translation>Hält beim aktuellen Schritt an und sendet die %1 bisher erledigten Schritte.</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Stops at the current step and keeps the unit&apos;s progress to continue it later.</source>
        <translation>Hält beim aktuellen Schritt an und behält den Fortschritt der Einheit, um sie später fortzusetzen.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>not chosen yet</source>
        <translation>noch nicht gewählt</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>%1 (run %2, from version %3; %4)</source>
        <translation>%1 (Lauf %2, ab Version %3; %4)</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>downloading %1 of %2</source>
        <translation>lädt %1 von %2 herunter</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>step %v of %m</source>
        <translation>Schritt %v von %m</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>under a second</source>
        <translation>unter einer Sekunde</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>about %1</source>
        <translation>etwa %1</translation>
    </message>
    <message>
        <location line="+26"/>
        <source>work unit %1 not counted %2: %3</source>
        <translation>Arbeitseinheit %1 nicht gezählt %2: %3</translation>
    </message>
    <message>
        <location line="-28"/>
        <source>measuring…</source>
        <translation>misst …</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>none right now</source>
        <translation>gerade keine</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>%1 tokens/s</source>
        <translation>%1 Tokens/s</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>work unit %1 accepted %2 (round %3, credit %4)</source>
        <translation>Arbeitseinheit %1 angenommen %2 (Runde %3, Guthaben %4)</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>none yet</source>
        <translation>noch keiner</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>1 result waiting to upload</source>
        <translation>1 Ergebnis wartet auf das Hochladen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>%1 results waiting to upload</source>
        <translation>%1 Ergebnisse warten auf das Hochladen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Credit: one for each token your accepted work units trained. The leaderboard ranks donors by it; it is not money.</source>
        <translation>Guthaben: eines für jedes Token, das Ihre angenommenen Arbeitseinheiten trainiert haben. Die Rangliste ordnet die Spender danach; es ist kein Geld.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>work units: %1, tokens: %2, credit: %3</source>
        <translation>Arbeitseinheiten: %1, Tokens: %2, Guthaben: %3</translation>
    </message>
</context>
<context>
    <name>tandem::ui::PerformancePage</name>
    <message>
        <location filename="../performance_page.cpp" line="+48"/>
        <source>&amp;Show:</source>
        <translation>&amp;Zeigen:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Last hour</source>
        <translation>Letzte Stunde</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Last day</source>
        <translation>Letzter Tag</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>Last week</source>
        <translation>Letzte Woche</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Time range</source>
        <translation>Zeitraum</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>Training speed over time</source>
        <translation>Trainingsgeschwindigkeit im Zeitverlauf</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Training speed (tokens/s)</source>
        <translation>Trainingsgeschwindigkeit (Tokens/s)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>tokens/s</source>
        <translation>Tokens/s</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>Device utilisation and temperature</source>
        <translation>Auslastung und Temperatur des Geräts</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Device</source>
        <translation>Gerät</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>utilisation (%)</source>
        <translation>Auslastung (%)</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>temperature (°C)</source>
        <translation>Temperatur (°C)</translation>
    </message>
    <message>
        <location line="+36"/>
        <source>The ledger cannot be read: %1</source>
        <translation>Das Journal kann nicht gelesen werden: %1</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>No speed measurements yet. While Tandem trains, it records the tokens per second (and the GPU&apos;s utilisation and temperature, where the driver reports them) once a minute.</source>
        <translation>Noch keine Geschwindigkeitsmessungen. Während Tandem trainiert, zeichnet es einmal pro Minute die Tokens pro Sekunde auf (und die Auslastung und Temperatur der GPU, wo der Treiber sie meldet).</translation>
    </message>
    <message>
        <location line="+30"/>
        <source>No training in this period; a longer range shows earlier work.</source>
        <translation>Kein Training in diesem Zeitraum; ein längerer Zeitraum zeigt frühere Arbeit.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>average %1 tokens/s, peak %2 tokens/s, samples: %3</source>
        <translation>im Mittel %1 Tokens/s, Spitze %2 Tokens/s, Messpunkte: %3</translation>
    </message>
    <message>
        <location line="+16"/>
        <source>This device reports no utilisation or temperature (the CPU, or a GPU without NVML).</source>
        <translation>Dieses Gerät meldet weder Auslastung noch Temperatur (die CPU, oder eine GPU ohne NVML).</translation>
    </message>
</context>
<context>
    <name>tandem::ui::ReceiptDialog</name>
    <message>
        <location filename="../receipt_dialog.cpp" line="+41"/>
        <source>Receipt for work unit %1</source>
        <translation>Quittung für Arbeitseinheit %1</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>✔ Verified: signed by the coordinator this computer registered with.</source>
        <translation>✔ Geprüft: signiert vom Koordinator, bei dem dieser Computer registriert ist.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>✘ Not verified: %1.</source>
        <translation>✘ Nicht bestätigt: %1.</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Cannot be checked here: no coordinator key (%1).</source>
        <translation>Kann hier nicht geprüft werden: kein Schlüssel des Koordinators (%1).</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Cannot be checked: the stored receipt cannot be read (%1).</source>
        <translation>Kann nicht geprüft werden: die gespeicherte Quittung ist nicht lesbar (%1).</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>Work unit:</source>
        <translation>Arbeitseinheit:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Applied to round:</source>
        <translation>Angewendet in Runde:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Weight in that round:</source>
        <translation>Gewicht in dieser Runde:</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Credit:</source>
        <translation>Guthaben:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>%1 (one for each token trained)</source>
        <translation>%1 (eines je trainiertem Token)</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Received:</source>
        <translation>Erhalten:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Signature of the coordinator (Ed25519, base64):</source>
        <translation>Signatur des Koordinators (Ed25519, Base64):</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Checked against the coordinator key:</source>
        <translation>Geprüft mit dem Schlüssel des Koordinators:</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>The receipt as the coordinator sent it:</source>
        <translation>Die Quittung, wie der Koordinator sie geschickt hat:</translation>
    </message>
    <message>
        <location line="+10"/>
        <source>Export as JSON…</source>
        <translation>Als JSON exportieren…</translation>
    </message>
    <message>
        <location line="+25"/>
        <source>Cannot write %1: %2</source>
        <translation>%1 kann nicht geschrieben werden: %2</translation>
    </message>
    <message>
        <location line="+11"/>
        <location line="+6"/>
        <source>Export the receipt</source>
        <translation>Quittung exportieren</translation>
    </message>
    <message>
        <location line="-5"/>
        <source>JSON files (*.json)</source>
        <translation>JSON-Dateien (*.json)</translation>
    </message>
</context>
<context>
    <name>tandem::ui::RunPage</name>
    <message>
        <location filename="../run_page.cpp" line="+34"/>
        <source>&amp;Refresh</source>
        <translation>A&amp;ktualisieren</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Ask the coordinator again</source>
        <translation>Den Koordinator erneut fragen</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>&amp;Show:</source>
        <translation>&amp;Zeigen:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>All rounds</source>
        <translation>Alle Runden</translation>
    </message>
    <message>
        <location line="+0"/>
        <location line="+1"/>
        <source>The last %L1 rounds</source>
        <translation>Die letzten %L1 Runden</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Rounds shown in the chart</source>
        <translation>Im Diagramm gezeigte Runden</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Drag across the chart to zoom in, right-click to zoom out.</source>
        <translation>Ziehen Sie über das Diagramm, um hineinzuzoomen; Rechtsklick zoomt heraus.</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Global validation loss per round</source>
        <translation>Globaler Validierungs-Loss pro Runde</translation>
    </message>
    <message>
        <location line="-1"/>
        <source>Validation loss of the shared model, per round</source>
        <translation>Validierungs-Loss des gemeinsamen Modells, pro Runde</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>validation loss</source>
        <translation>Validierungs-Loss</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>your contributions</source>
        <translation>Ihre Beiträge</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>round</source>
        <translation>Runde</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>loss</source>
        <translation>Loss</translation>
    </message>
    <message>
        <location line="+19"/>
        <source>What the model writes now</source>
        <translation>Was das Modell jetzt schreibt</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>Asking the coordinator for the training run&apos;s progress…</source>
        <translation>Fragt den Koordinator nach dem Fortschritt des Trainingslaufs …</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>The training run&apos;s progress is not available in this build.</source>
        <translation>Der Fortschritt des Trainingslaufs ist in dieser Version nicht verfügbar.</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>No coordinator chosen yet. Choose one in Settings to see the training run&apos;s loss curve here.</source>
        <translation>Noch kein Koordinator gewählt. Wählen Sie einen in den Einstellungen, um hier die Loss-Kurve des Trainingslaufs zu sehen.</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Asking the coordinator…</source>
        <translation>Fragt den Koordinator …</translation>
    </message>
    <message>
        <location line="+25"/>
        <source>What the model writes now (after round %1)</source>
        <translation>Was das Modell jetzt schreibt (nach Runde %1)</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>Could not reach the coordinator: %1</source>
        <translation>Der Koordinator war nicht erreichbar: %1</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Could not reach the coordinator: %1
Tandem asks again in a minute.</source>
        <translation>Der Koordinator war nicht erreichbar: %1
Tandem fragt in einer Minute erneut.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Run %1, round %L2 open. Workers active: %L3. Tokens trained in all: %4. Model: %5.</source>
        <translation>Lauf %1, Runde %L2 offen. Aktive Teilnehmer: %L3. Insgesamt trainierte Tokens: %4. Modell: %5.</translation>
    </message>
    <message>
        <location line="+50"/>
        <source>Rounds with a contribution from this computer: %L1 of %L2.</source>
        <translation>Runden mit einem Beitrag dieses Computers: %L1 von %L2.</translation>
    </message>
    <message>
        <location line="-41"/>
        <source>Latest export of the model: %1 (%2, version %3).</source>
        <translation>Letzter Export des Modells: %1 (%2, Version %3).</translation>
    </message>
    <message>
        <location line="+31"/>
        <source>The run has no evaluated round yet (round %1 is open). The loss curve appears once the coordinator has closed and evaluated the first round.</source>
        <translation>Der Lauf hat noch keine ausgewertete Runde (Runde %1 ist offen). Die Loss-Kurve erscheint, sobald der Koordinator die erste Runde abgeschlossen und ausgewertet hat.</translation>
    </message>
    <message>
        <location line="+8"/>
        <source>None of these rounds has a result from this computer yet.</source>
        <translation>Keine dieser Runden enthält bisher ein Ergebnis dieses Computers.</translation>
    </message>
</context>
<context>
    <name>tandem::ui::SettingsDialog</name>
    <message>
        <location filename="../schedule_windows.cpp" line="+39"/>
        <source>Monday</source>
        <translation>Montag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Tuesday</source>
        <translation>Dienstag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Wednesday</source>
        <translation>Mittwoch</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Thursday</source>
        <translation>Donnerstag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Friday</source>
        <translation>Freitag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Saturday</source>
        <translation>Samstag</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Sunday</source>
        <translation>Sonntag</translation>
    </message>
    <message>
        <location line="+34"/>
        <source>the time window %1 %2 to %3 overlaps %4 %5 to %6; expected windows that do not overlap (join them into one, or change the times)</source>
        <translation>das Zeitfenster %1 %2 bis %3 überschneidet sich mit %4 %5 bis %6; erwartet sind Fenster ohne Überschneidung (fassen Sie sie zu einem zusammen oder ändern Sie die Zeiten)</translation>
    </message>
    <message>
        <location filename="../settings_dialog.cpp" line="+52"/>
        <source>Tandem Settings</source>
        <translation>Tandem-Einstellungen</translation>
    </message>
    <message>
        <location line="+20"/>
        <source>Device</source>
        <translation>Gerät</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Device:</source>
        <translation>&amp;Gerät:</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>the default (%1)</source>
        <translation>der Standard (%1)</translation>
    </message>
    <message>
        <location line="+1"/>
        <location line="+4"/>
        <source>Data directory</source>
        <translation>Datenverzeichnis</translation>
    </message>
    <message>
        <location line="-3"/>
        <source>&amp;Browse…</source>
        <translation>&amp;Durchsuchen …</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>Data &amp;directory:</source>
        <translation>Daten&amp;verzeichnis:</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Start Tandem when I &amp;log in</source>
        <translation>Tandem beim &amp;Anmelden starten</translation>
    </message>
    <message>
        <location line="+14"/>
        <source>anonymous</source>
        <translation>anonym</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Public display name</source>
        <translation>Öffentlicher Anzeigename</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Shown on the run&apos;s public page and leaderboard; 1 to 32 characters, unique on the coordinator. Empty: anonymous.</source>
        <translation>Erscheint auf der öffentlichen Seite des Laufs und in der Bestenliste; 1 bis 32 Zeichen, beim Koordinator eindeutig. Leer: anonym.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Public &amp;name:</source>
        <translation>Öffentlicher &amp;Name:</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>no team</source>
        <translation>kein Team</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Team</source>
        <translation>Team</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Your work also counts for this team; 1 to 32 characters.</source>
        <translation>Ihre Arbeit zählt auch für dieses Team; 1 bis 32 Zeichen.</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;Team:</source>
        <translation>&amp;Team:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;General</source>
        <translation>&amp;Allgemein</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>Only when the computer is &amp;idle for</source>
        <translation>Nur, wenn der Computer im &amp;Leerlauf ist seit</translation>
    </message>
    <message>
        <location line="+4"/>
        <source> min</source>
        <translation> min</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Idle minutes</source>
        <translation>Leerlaufminuten</translation>
    </message>
    <message>
        <location line="+15"/>
        <source>Pause while on &amp;battery</source>
        <translation>Im &amp;Akkubetrieb pausieren</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Pause when the device is hotter than</source>
        <translation>Pausieren, wenn das Gerät heißer ist als</translation>
    </message>
    <message>
        <location line="+4"/>
        <source> °C</source>
        <translation> °C</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Temperature limit</source>
        <translation>Temperaturgrenze</translation>
    </message>
    <message>
        <location line="+14"/>
        <source>Only at these &amp;times:</source>
        <translation>Nur zu diesen &amp;Zeiten:</translation>
    </message>
    <message>
        <location line="+14"/>
        <source>Add</source>
        <translation>Hinzufügen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Add a time window on %1</source>
        <translation>Ein Zeitfenster am %1 hinzufügen</translation>
    </message>
    <message>
        <location line="+22"/>
        <source>A day may have several windows. The same from and to means the whole day; a &quot;to&quot; before the &quot;from&quot; runs past midnight.</source>
        <translation>Ein Tag kann mehrere Fenster haben. Gleiche Werte für „von“ und „bis“ bedeuten den ganzen Tag; ein „bis“ vor dem „von“ reicht über Mitternacht hinaus.</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>&amp;When to work</source>
        <translation>&amp;Wann arbeiten</translation>
    </message>
    <message>
        <location line="+5"/>
        <location line="+2"/>
        <source> GB per day</source>
        <translation> GB pro Tag</translation>
    </message>
    <message>
        <location line="-2"/>
        <location line="+2"/>
        <source>no cap</source>
        <translation>keine Grenze</translation>
    </message>
    <message>
        <location line="+2"/>
        <location line="+2"/>
        <source> Mbit/s</source>
        <translation> Mbit/s</translation>
    </message>
    <message>
        <location line="-2"/>
        <location line="+2"/>
        <source>unlimited</source>
        <translation>unbegrenzt</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Daily &amp;upload cap:</source>
        <translation>Tägliche &amp;Upload-Grenze:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Daily do&amp;wnload cap:</source>
        <translation>Tägliche Do&amp;wnload-Grenze:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Upload &amp;rate limit:</source>
        <translation>Upload-&amp;Ratenbegrenzung:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Download r&amp;ate limit:</source>
        <translation>Download-R&amp;atenbegrenzung:</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>From the system (https_proxy, all_proxy)</source>
        <translation>Vom System (https_proxy, all_proxy)</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>No proxy</source>
        <translation>Kein Proxy</translation>
    </message>
    <message>
        <location line="+0"/>
        <source>This proxy:</source>
        <translation>Dieser Proxy:</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>Proxy URL</source>
        <translation>Proxy-URL</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>&amp;Proxy:</source>
        <translation>&amp;Proxy:</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>&amp;Network</source>
        <translation>&amp;Netzwerk</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>the system&apos;s certificate authorities</source>
        <translation>die Zertifizierungsstellen des Systems</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Coordinator &amp;URL:</source>
        <translation>&amp;URL des Koordinators:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Pinned &amp;key:</source>
        <translation>Festgelegter &amp;Schlüssel:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>&amp;CA file:</source>
        <translation>&amp;CA-Datei:</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>A coordinator with a self-signed certificate is trusted by its pinned key; one with a certificate from a CA needs neither, or a CA file. Changes here register Tandem with the new coordinator.</source>
        <translation>Einem Koordinator mit selbst signiertem Zertifikat wird über seinen festgelegten Schlüssel vertraut; einer mit einem Zertifikat einer Zertifizierungsstelle braucht keinen davon, oder eine CA-Datei. Änderungen hier melden Tandem beim neuen Koordinator an.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>&amp;Coordinator</source>
        <translation>&amp;Koordinator</translation>
    </message>
    <message>
        <location line="+41"/>
        <source>Automatic (the best usable GPU, else the CPU)</source>
        <translation>Automatisch (die beste nutzbare GPU, sonst die CPU)</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>: not usable, %1</source>
        <translation>: nicht nutzbar, %1</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>CPU</source>
        <translation>CPU</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>No GPU can be used: %1.</source>
        <translation>Keine GPU ist nutzbar: %1.</translation>
    </message>
    <message>
        <location line="+120"/>
        <source>%1, window %2, from</source>
        <translation>%1, Fenster %2, von</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>%1, window %2, to</source>
        <translation>%1, Fenster %2, bis</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Remove window %1 of %2</source>
        <translation>Fenster %1 am %2 entfernen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>from</source>
        <translation>von</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>to</source>
        <translation>bis</translation>
    </message>
    <message>
        <location line="+46"/>
        <source>%1 is chosen but has no time window; expected at least one (press Add), or leave the day unchecked</source>
        <translation>%1 ist gewählt, hat aber kein Zeitfenster; erwartet ist mindestens eines (Hinzufügen drücken), oder lassen Sie den Tag abgewählt</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>no proxy URL given; expected one, or choose &quot;From the system&quot; or &quot;No proxy&quot;</source>
        <translation>keine Proxy-URL angegeben; erwartet ist eine, oder wählen Sie „Vom System“ oder „Kein Proxy“</translation>
    </message>
    <message>
        <location line="+5"/>
        <source>The settings could not be saved: %1</source>
        <translation>Die Einstellungen konnten nicht gespeichert werden: %1</translation>
    </message>
    <message>
        <location line="+11"/>
        <source>Please correct:</source>
        <translation>Bitte korrigieren:</translation>
    </message>
</context>
<context>
    <name>tandem::ui::StateView</name>
    <message>
        <location filename="../state_view.cpp" line="-121"/>
        <source>“Only when idle” cannot be followed: Tandem cannot tell how long this computer has been idle (%1), so it does not work. Switch the rule off, or use “Only at these times” instead.</source>
        <translation>„Nur im Leerlauf“ kann nicht eingehalten werden: Tandem kann nicht feststellen, wie lange dieser Computer schon im Leerlauf ist (%1), und arbeitet daher nicht. Schalten Sie die Regel aus, oder nutzen Sie stattdessen „Nur zu diesen Zeiten“.</translation>
    </message>
    <message>
        <location line="+9"/>
        <source>The temperature limit cannot be applied: the device Tandem trains on reports no temperature (a CPU, or a GPU without a sensor), so Tandem works without watching it.</source>
        <translation>Die Temperaturgrenze kann nicht angewandt werden: Das Gerät, auf dem Tandem trainiert, meldet keine Temperatur (ein Prozessor oder eine GPU ohne Sensor), daher arbeitet Tandem, ohne sie zu überwachen.</translation>
    </message>
</context>
<context>
    <name>tandem::ui::TrayController</name>
    <message>
        <location filename="../tray.cpp" line="+21"/>
        <source>Tandem</source>
        <translation>Tandem</translation>
    </message>
    <message>
        <location line="+30"/>
        <source>This desktop has no system tray, so Tandem has no tray icon. Everything works from this window: closing it minimises it and Tandem keeps working; use Tandem ▸ Quit (Ctrl+Q) to stop.</source>
        <translation>Diese Arbeitsumgebung hat keinen Infobereich, daher hat Tandem kein Symbol dort. Alles funktioniert über dieses Fenster: Schließen minimiert es, und Tandem arbeitet weiter; mit Tandem ▸ Beenden (Strg+Q) hören Sie auf.</translation>
    </message>
    <message>
        <location line="+33"/>
        <source>Tandem needs your attention</source>
        <translation>Tandem braucht Ihre Aufmerksamkeit</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>Daily data cap reached</source>
        <translation>Tägliche Datengrenze erreicht</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>%1. Tandem continues tomorrow, or raise the cap in Settings.</source>
        <translation>%1. Tandem macht morgen weiter, oder erhöhen Sie die Grenze in den Einstellungen.</translation>
    </message>
    <message>
        <location line="+16"/>
        <source>Tandem keeps working</source>
        <translation>Tandem arbeitet weiter</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Tandem is still contributing in the background. Open it or quit it from its icon in the tray.</source>
        <translation>Tandem trägt im Hintergrund weiter bei. Öffnen oder beenden Sie es über sein Symbol im Infobereich.</translation>
    </message>
    <message>
        <location line="+5"/>
        <location line="+4"/>
        <location line="+6"/>
        <source>Tandem is in the tray</source>
        <translation>Tandem ist im Infobereich</translation>
    </message>
    <message>
        <location line="-9"/>
        <source>%1. Resume, open or quit Tandem from its icon in the tray.</source>
        <translation>%1. Über sein Symbol im Infobereich können Sie Tandem fortsetzen, öffnen oder beenden.</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>%1. Tandem goes on by itself; open it from its icon in the tray.</source>
        <translation>%1. Tandem macht von selbst weiter; öffnen Sie es über sein Symbol im Infobereich.</translation>
    </message>
    <message>
        <location line="+6"/>
        <source>%1. Open Tandem from its icon in the tray to see what to do.</source>
        <translation>%1. Öffnen Sie Tandem über sein Symbol im Infobereich, um zu sehen, was zu tun ist.</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>Your first contribution was accepted</source>
        <translation>Ihr erster Beitrag wurde angenommen</translation>
    </message>
    <message>
        <location line="+1"/>
        <source>Work unit %1 is now part of the shared model. Thank you!</source>
        <translation>Arbeitseinheit %1 ist jetzt Teil des gemeinsamen Modells. Vielen Dank!</translation>
    </message>
</context>
<context>
    <name>tandem::ui::X11IdleSource</name>
    <message>
        <location filename="../idle_x11.cpp" line="+36"/>
        <source>on Wayland the X server does not see all input</source>
        <translation>unter Wayland sieht der X-Server nicht alle Eingaben</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>there is no X display (DISPLAY is not set)</source>
        <translation>es gibt keine X-Anzeige (DISPLAY ist nicht gesetzt)</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>the X display %1 cannot be opened</source>
        <translation>die X-Anzeige %1 lässt sich nicht öffnen</translation>
    </message>
    <message>
        <location line="+4"/>
        <source>the X server has no MIT-SCREEN-SAVER extension</source>
        <translation>der X-Server hat keine MIT-SCREEN-SAVER-Erweiterung</translation>
    </message>
    <message>
        <location line="+12"/>
        <source>the X server did not tell the idle time</source>
        <translation>der X-Server hat die Leerlaufzeit nicht mitgeteilt</translation>
    </message>
</context>
<context>
    <name>tandem::ui::autostart</name>
    <message>
        <location filename="../autostart.cpp" line="+73"/>
        <source>Cannot remove %1.</source>
        <translation>%1 kann nicht entfernt werden.</translation>
    </message>
    <message>
        <location line="+7"/>
        <source>Cannot create the folder %1.</source>
        <translation>Der Ordner %1 kann nicht angelegt werden.</translation>
    </message>
    <message>
        <location line="+20"/>
        <source>Cannot write %1: %2</source>
        <translation>%1 kann nicht geschrieben werden: %2</translation>
    </message>
    <message>
        <location line="+13"/>
        <source>Start at login is not supported on Windows yet.</source>
        <translation>Der Start bei der Anmeldung wird unter Windows noch nicht unterstützt.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Start at login is not supported on macOS yet.</source>
        <translation>Der Start bei der Anmeldung wird unter macOS noch nicht unterstützt.</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>Start at login is not supported on this platform.</source>
        <translation>Der Start bei der Anmeldung wird auf dieser Plattform nicht unterstützt.</translation>
    </message>
</context>
<context>
    <name>tandem::ui::modelInWords</name>
    <message>
        <location filename="../model_text.cpp" line="+15"/>
        <source>%1 billion parameters</source>
        <translation>%1 Milliarden Parameter</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>%1 million parameters</source>
        <translation>%1 Millionen Parameter</translation>
    </message>
    <message>
        <location line="+3"/>
        <source>%1 parameters</source>
        <translation>%1 Parameter</translation>
    </message>
    <message>
        <location line="+2"/>
        <source>%1-layer model</source>
        <translation>%1-schichtiges Modell</translation>
    </message>
</context>
</TS>
